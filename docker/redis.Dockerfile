# Lilypad's private Redis: `lilypad start` runs it when REDIS_URL is unset and no redis-server is
# installed, and docker/compose.yml runs it as the queue's Redis. Built by `npm run images`
# (docker/build-images.sh) as lilypad-redis:latest, from Debian's redis-server package, so it
# builds where no image registry is reachable.
#
# Arguments after the image name are redis-server's (`docker run lilypad-redis:latest
# --requirepass X --appendonly yes`), or a config file, or `redis-server ...`; the data directory
# is /data (the working directory). It runs as the unprivileged `redis` user, or as any uid the
# caller picks with --user, and needs no capabilities and no writable root.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title=lilypad-redis

# Only for the build: not kept in the image's environment.
ARG DEBIAN_FRONTEND=noninteractive

# One layer: Redis (the package makes the `redis` system user), apt's caches out, /data for it.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends redis-server; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    mkdir -p /data; \
    chown redis:redis /data; \
    chmod 0700 /data; \
    redis-server --version

COPY redis/entrypoint.sh /usr/local/bin/lilypad-redis

VOLUME ["/data"]
WORKDIR /data
USER redis
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/lilypad-redis"]
