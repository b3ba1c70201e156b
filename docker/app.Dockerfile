# Lilypad app image: the webhook server (`lilypad web`) and workers (`lilypad worker`).
# Build from the project root: docker build -f docker/app.Dockerfile -t lilypad:latest .
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}

# Workers clone and push on the host side of the sandbox: they need git and tar.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends git tar ca-certificates; \
    rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY app.yml tsconfig.json ./

ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 LILYPAD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["node", "/app/bin/lilypad.js"]
CMD ["start"]
