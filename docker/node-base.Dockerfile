# A Node.js base image for docker/app.Dockerfile where no image registry is reachable (Debian 12's
# own nodejs is 18, older than the Node >= 20.18 Lilypad needs): Debian from BASE_IMAGE plus the
# node binary and npm of the machine that builds it. Built by `npm run images -- --node-base`
# (docker/build-images.sh), which puts `node` and `npm/` into a temporary build context after
# checking that this machine's node is a Linux build of the right version.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title=lilypad-node

# node links against libstdc++ and libgcc_s, which the Debian base has for apt already.
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
# The certificate authorities this machine's administrator added (/usr/local/share/ca-certificates,
# often a TLS-inspecting proxy's), so that `npm ci` in the app image trusts the registry as the host
# does: node reads them through NODE_EXTRA_CA_CERTS, and ca-certificates picks them up when the
# app image installs it. Public certificates only; the folder may be empty.
COPY local-ca/ /usr/local/share/ca-certificates/
ENV NODE_EXTRA_CA_CERTS=/usr/local/etc/lilypad-local-ca.pem
RUN set -eux; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx; \
    mkdir -p /usr/local/etc; \
    cat /usr/local/share/ca-certificates/*.crt >"$NODE_EXTRA_CA_CERTS" 2>/dev/null || true; \
    node --version; \
    npm --version

CMD ["node"]
