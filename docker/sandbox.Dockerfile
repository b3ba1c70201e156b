# Default sandbox image for Lilypad: the container a coding agent works in.
# Built by `npm run images` (docker/build-images.sh) as lilypad-sandbox:latest.
#
# The agent runs as the non-root user `lilypad` (uid/gid 1000) with the
# repository checked out in /testbed. The agent phase has no network and no
# capabilities, so everything the agent and the tests need (compilers,
# interpreters, test runners, git) has to be in the image already. Lilypad's
# toolbox needs bash and python3.
#
# Every package comes from Debian 12 (docker/sandbox/install.sh). What each
# ecosystem gets:
#   Python  python3 3.11 with venv, pip, the headers (python3-dev) and pytest
#           (python3-pytest): `python3 -m pytest` works without network.
#   Node    nodejs 18 and npm 9; yarn 1 (Debian's yarnpkg, also as `yarn`).
#           Bookworm packages neither corepack nor pnpm: setup can
#           `npm install -g pnpm`, which lands in ~/.local (NPM_CONFIG_PREFIX).
#   rust    rustc and cargo 1.85 (rustc-web, cargo-web): `cargo test --offline`.
#   go      the newest Go of bookworm-backports (1.23), else bookworm's 1.19.
#   java    OpenJDK 17, Maven 3.8 and Debian's Maven repository with the
#           default plugins, JUnit 4 and JUnit 5: `mvn -o test` works without
#           network (docker/sandbox/maven-settings.xml).
#   always  build-essential (gcc, g++, make), pkg-config, libssl-dev, git,
#           curl, unzip, xz-utils.
# TOOLCHAINS picks the optional ones (rust, go, java; `none` for none): the
# image is about 0.7 GB without them and 2 GB with all three
# (docs/sandbox-image.md). The image's label dev.lilypad.toolchains says which.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG TOOLCHAINS="rust go java"
LABEL org.opencontainers.image.title=lilypad-sandbox \
      dev.lilypad.toolchains="${TOOLCHAINS}"

COPY sandbox/ /tmp/lilypad-build/

# One layer: packages, apt cleanup, the user, /testbed, the user's git config and Go build cache.
RUN set -eux; \
    bash /tmp/lilypad-build/install.sh "${TOOLCHAINS}"; \
    groupadd --gid 1000 lilypad; \
    useradd --uid 1000 --gid 1000 --home-dir /home/lilypad --create-home \
        --shell /bin/bash lilypad; \
    mkdir -p /testbed; \
    chown 1000:1000 /testbed; \
    git config --file /home/lilypad/.gitconfig safe.directory '*'; \
    git config --file /home/lilypad/.gitconfig user.name 'Lilypad'; \
    git config --file /home/lilypad/.gitconfig user.email 'lilypad@localhost'; \
    chown 1000:1000 /home/lilypad/.gitconfig; \
    runuser -u lilypad -- env HOME=/home/lilypad PATH=/usr/local/bin:/usr/bin:/bin \
        bash /tmp/lilypad-build/warm-go-cache.sh; \
    rm -rf /tmp/lilypad-build

# Debian marks its Python as externally managed (PEP 668); let `pip install --user` work for the agent.
# The user's own bin folder (pip --user, npm -g) comes LAST on PATH: Lilypad starts its toolbox and
# reaper as `python3` through PATH, and a folder the agent can write must never shadow the system's.
ENV HOME=/home/lilypad \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    NPM_CONFIG_PREFIX=/home/lilypad/.local \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/home/lilypad/.local/bin
WORKDIR /testbed
USER lilypad

CMD ["sleep", "infinity"]
