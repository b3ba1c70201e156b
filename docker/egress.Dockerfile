# Lilypad's egress proxy: the only way out for a repository's setup commands.
# Built by `npm run images` (docker/build-images.sh) as lilypad-egress:latest.
#
# Squid from Debian's packages, configured by docker/egress/squid.conf. The
# per-run policy (allowed names, refused address ranges, optional hosts file)
# comes from Lilypad in the container's environment; the entrypoint writes it
# to a tmpfs and starts Squid in the foreground as the unprivileged `proxy`
# user, so the container needs no capabilities and can keep a read-only root.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title=lilypad-egress

# Only for the build: not kept in the image's environment.
ARG DEBIAN_FRONTEND=noninteractive

# One layer: Squid, then apt's caches and Debian's sample configuration out.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends squid; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    chmod u-s,g-s /usr/lib/squid/pinger; \
    squid -v | head -n 1

COPY egress/squid.conf /etc/squid/lilypad.conf
COPY egress/entrypoint.sh /usr/local/bin/lilypad-egress

USER proxy
EXPOSE 3128
ENTRYPOINT ["/usr/local/bin/lilypad-egress"]
