# Default sandbox image for Lilypad: the container a coding agent works in.
# Built by `npm run images` (docker/build-images.sh) as lilypad-sandbox:latest.
#
# The agent runs as the non-root user `lilypad` (uid/gid 1000) with the
# repository checked out in /testbed. The agent phase has no network and no
# capabilities, so everything the agent needs (compilers, interpreters, git)
# has to be in the image already. Lilypad's toolbox needs bash and python3.
# pytest comes from Debian (python3-pytest): `python3 -m pytest` works without
# network or a setup command.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title=lilypad-sandbox

# Only for the build: not kept in the image's environment.
ARG DEBIAN_FRONTEND=noninteractive

# One layer: packages, apt cleanup, the user, /testbed and the user's git config.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        bash \
        coreutils \
        findutils \
        procps \
        git \
        ca-certificates \
        python3 \
        python3-pip \
        python3-pytest \
        python3-venv \
        build-essential \
        nodejs \
        npm; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    groupadd --gid 1000 lilypad; \
    useradd --uid 1000 --gid 1000 --home-dir /home/lilypad --create-home \
        --shell /bin/bash lilypad; \
    mkdir -p /testbed; \
    chown 1000:1000 /testbed; \
    git config --file /home/lilypad/.gitconfig safe.directory '*'; \
    git config --file /home/lilypad/.gitconfig user.name 'Lilypad'; \
    git config --file /home/lilypad/.gitconfig user.email 'lilypad@localhost'; \
    chown 1000:1000 /home/lilypad/.gitconfig

# Debian marks its Python as externally managed (PEP 668); let `pip install --user` work for the agent.
ENV HOME=/home/lilypad PIP_BREAK_SYSTEM_PACKAGES=1
WORKDIR /testbed
USER lilypad

CMD ["sleep", "infinity"]
