# Default sandbox image for Lilypad: the container a coding agent works in.
# Built by `npm run images` (docker/build-images.sh) as lilypad-sandbox:latest.
#
# The agent runs as the non-root user `lilypad` (uid/gid 1000) with the
# repository checked out in /testbed. The agent phase has no network and no
# capabilities, so everything the agent and the tests need (compilers,
# interpreters, test runners, git) has to be in the image already. Lilypad's
# toolbox needs bash and python3.
#
# Every package comes from Debian 12 (bookworm, main). What each ecosystem gets:
#   Python  python3 with venv, pip, the headers (python3-dev) and pytest
#           (python3-pytest): `python3 -m pytest` works without network.
#   Node    nodejs 18 and npm 9; yarn 1 (Debian's yarnpkg, also as `yarn`).
#           Bookworm packages neither corepack nor pnpm: setup can
#           `npm install -g pnpm`, which lands in ~/.local (NPM_CONFIG_PREFIX).
#   rust    rustc and cargo 1.85 (rustc-web, cargo-web): `cargo test --offline`.
#   go      Go 1.19 (golang-go; bookworm has no newer): `go test ./...`.
#   java    OpenJDK 17 (default-jdk-headless), Maven 3.8 and Debian's Maven
#           repository with the surefire plugin, JUnit 4 and JUnit 5: `mvn -o
#           test` works without network (see docker/sandbox/maven-settings.xml).
#   always  build-essential (gcc, g++, make), pkg-config, libssl-dev, git,
#           curl, unzip, xz-utils.
# TOOLCHAINS picks the optional ones (rust, go, java; `none` for none): the
# image is about 0.65 GB without them and 2 GB with all three (docs/sandbox-image.md).
# The list is kept in the image's label dev.lilypad.toolchains.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG TOOLCHAINS="rust go java"
LABEL org.opencontainers.image.title=lilypad-sandbox \
      dev.lilypad.toolchains="${TOOLCHAINS}"

# Only for the build: not kept in the image's environment.
ARG DEBIAN_FRONTEND=noninteractive

# Maven's configuration; installed below only when the java toolchain is.
COPY sandbox/maven-settings.xml sandbox/mavenrc /tmp/lilypad-maven/

# One layer: packages, apt cleanup, the user, /testbed and the user's git config.
RUN set -eux; \
    optional=""; \
    for toolchain in ${TOOLCHAINS}; do \
        case "$toolchain" in \
            rust) optional="$optional rustc-web cargo-web" ;; \
            go) optional="$optional golang-go" ;; \
            java) optional="$optional default-jdk-headless maven libmaven-resources-plugin-java libmaven-compiler-plugin-java libmaven-install-plugin-java libsurefire-java junit4 junit5" ;; \
            none) ;; \
            *) echo "unknown toolchain '$toolchain' in TOOLCHAINS: use rust, go, java or none" >&2; exit 1 ;; \
        esac; \
    done; \
    # The JDK's post-install links its manual pages; slim images have no man1 folder.
    mkdir -p /usr/share/man/man1; \
    # No fsync per unpacked file while building: a failed build discards the layer anyway.
    echo force-unsafe-io > /etc/dpkg/dpkg.cfg.d/lilypad-build-unsafe-io; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        bash \
        coreutils \
        findutils \
        procps \
        git \
        ca-certificates \
        curl \
        unzip \
        xz-utils \
        python3 \
        python3-dev \
        python3-pip \
        python3-pytest \
        python3-venv \
        build-essential \
        pkg-config \
        libssl-dev \
        nodejs \
        npm \
        yarnpkg \
        $optional; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /etc/dpkg/dpkg.cfg.d/lilypad-build-unsafe-io; \
    # Debian calls yarn `yarnpkg` (the name `yarn` belongs to another package).
    ln -s /usr/bin/yarnpkg /usr/local/bin/yarn; \
    if command -v mvn >/dev/null; then \
        install -m 0644 /tmp/lilypad-maven/maven-settings.xml /etc/maven/settings.xml; \
        install -m 0644 /tmp/lilypad-maven/mavenrc /etc/mavenrc; \
    fi; \
    rm -rf /tmp/lilypad-maven; \
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
# The user's own bin folder (pip --user, npm -g) comes LAST on PATH: Lilypad starts its toolbox and
# reaper as `python3` through PATH, and a folder the agent can write must never shadow the system's.
ENV HOME=/home/lilypad \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    NPM_CONFIG_PREFIX=/home/lilypad/.local \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/home/lilypad/.local/bin
WORKDIR /testbed
USER lilypad

CMD ["sleep", "infinity"]
