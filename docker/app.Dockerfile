# Lilypad app image: the webhook server (`lilypad web`) and workers (`lilypad worker`).
# Build from the project root: docker build -f docker/app.Dockerfile -t lilypad:latest .
#
# NODE_IMAGE is any Debian 12 based image with Node.js >= 20.18 and npm on PATH: the official
# node:20-bookworm-slim by default, or lilypad-node:20 made from Debian and this machine's node
# (`npm run images -- --node-base`) where no image registry is reachable.
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}

# Only for the build: not kept in the image's environment.
ARG DEBIAN_FRONTEND=noninteractive

# Workers clone and push on the host side of the sandbox: they need git and tar.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends git tar ca-certificates; \
    rm -rf /var/lib/apt/lists/*; \
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); if (a < 20 || (a === 20 && b < 18)) { console.error(`NODE_IMAGE has Node ${process.version}; Lilypad needs >= 20.18`); process.exit(1); }'

WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY app.yml tsconfig.json ./
COPY docker/compose-entry.sh /usr/local/bin/lilypad-compose

ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 LILYPAD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["node", "/app/bin/lilypad.js"]
CMD ["start"]
