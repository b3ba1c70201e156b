#!/usr/bin/env bash
# Installs the sandbox image's packages (run once by docker/sandbox.Dockerfile, as root).
#
#   bash install.sh "<toolchains>"     toolchains: any of rust go java, or none
#
# Every package comes from Debian 12. Go is the one exception to bookworm's main suite:
# bookworm has Go 1.19, whose go.mod parser rejects what Go 1.21 and later write (`go 1.22.0`,
# a `toolchain` line), so the newest Go in bookworm-backports is taken when that suite is there.
set -euo pipefail

readonly HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DEBIAN_FRONTEND=noninteractive

CORE=(
  bash coreutils findutils procps git ca-certificates curl unzip xz-utils
  python3 python3-dev python3-pip python3-pytest python3-venv
  build-essential pkg-config libssl-dev
  nodejs npm yarnpkg
)
RUST=(rustc-web cargo-web)
# The default lifecycle's plugins (resources, compiler, surefire, install) and both JUnits, so that
# `mvn -o test` finds them in Debian's Maven repository (/usr/share/maven-repo).
JAVA=(
  default-jdk-headless maven
  libmaven-resources-plugin-java libmaven-compiler-plugin-java libmaven-install-plugin-java
  libsurefire-java junit4 junit5
)

want() {
  [[ " $TOOLCHAINS " == *" $1 "* ]]
}

# Adds bookworm-backports from the mirror the image already uses (its one-line or deb822 sources).
add_backports() {
  local uri
  uri="$({
    grep -hoE '^deb +(\[[^]]*\] +)?[a-z]+://[^ ]+' /etc/apt/sources.list 2>/dev/null | awk '{print $NF}'
    grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
  } | grep -v security | head -n 1 || true)"
  [[ -n $uri ]] || return 1
  echo "deb $uri bookworm-backports main" >/etc/apt/sources.list.d/lilypad-backports.list
}

# The newest golang-1.N-go that backports offers, or nothing.
newest_backported_go() {
  apt-cache search --names-only '^golang-1\.[0-9]+-go$' | awk '{print $1}' | sort -V | tail -n 1
}

install_go() {
  local pkg=""
  if add_backports && apt-get update && pkg="$(newest_backported_go)" && [[ -n $pkg ]]; then
    apt-get install -y --no-install-recommends -t bookworm-backports "$pkg"
    local version="${pkg#golang-}"
    version="${version%-go}"
    ln -sf "/usr/lib/go-$version/bin/go" /usr/local/bin/go
    ln -sf "/usr/lib/go-$version/bin/gofmt" /usr/local/bin/gofmt
  else
    echo "bookworm-backports has no Go here: installing bookworm's golang-go (1.19)" >&2
    rm -f /etc/apt/sources.list.d/lilypad-backports.list
    apt-get update
    apt-get install -y --no-install-recommends golang-go
  fi
  # Only Go was wanted from backports; later upgrades should not see the suite.
  rm -f /etc/apt/sources.list.d/lilypad-backports.list
}

main() {
  TOOLCHAINS=" ${1:-} "
  local t packages=("${CORE[@]}")
  for t in $TOOLCHAINS; do
    case $t in
      rust) packages+=("${RUST[@]}") ;;
      java) packages+=("${JAVA[@]}") ;;
      go | none) ;;
      *) echo "unknown toolchain '$t' in TOOLCHAINS: use rust, go, java or none" >&2; exit 1 ;;
    esac
  done

  # The JDK's post-install links its manual pages; slim images have no man1 folder.
  mkdir -p /usr/share/man/man1
  # No fsync per unpacked file while building: a failed build discards the layer anyway.
  echo force-unsafe-io >/etc/dpkg/dpkg.cfg.d/lilypad-build-unsafe-io

  apt-get update
  apt-get install -y --no-install-recommends "${packages[@]}"
  if want go; then install_go; fi

  # Debian calls yarn `yarnpkg` (the name `yarn` belongs to another package).
  ln -sf /usr/bin/yarnpkg /usr/local/bin/yarn
  if want java; then
    install -m 0644 "$HERE/maven-settings.xml" /etc/maven/settings.xml
    install -m 0644 "$HERE/mavenrc" /etc/mavenrc
  fi

  apt-get clean
  rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /etc/dpkg/dpkg.cfg.d/lilypad-build-unsafe-io
}

main "$@"
