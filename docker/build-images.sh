#!/usr/bin/env bash
# Builds Lilypad's images (run as `npm run images`): the sandbox, the egress
# proxy that setup commands reach the network through, and the private Redis.
#
#   bash docker/build-images.sh [--if-missing] [--node-base] [--verbose]
#
#   --if-missing  build only the images whose tag does not exist yet
#   --node-base   also build lilypad-node:20 (Debian plus this machine's node,
#                 npm and local CA certificates), a NODE_IMAGE for
#                 docker/app.Dockerfile where node:20-bookworm-slim cannot
#                 be pulled
#   --verbose     stream the output of docker/debootstrap instead of keeping
#                 it in a log file (the log's tail is printed on failure)
#
# Environment:
#   LILYPAD_SANDBOX_IMAGE  sandbox tag to build (default lilypad-sandbox:latest)
#   LILYPAD_EGRESS_IMAGE   egress proxy tag to build (default lilypad-egress:latest)
#   LILYPAD_REDIS_IMAGE    private Redis tag to build (default lilypad-redis:latest)
#   LILYPAD_BASE_IMAGE     Debian 12 base of them all (default debian:bookworm-slim)
#   LILYPAD_SANDBOX_TOOLCHAINS  optional toolchains in the sandbox, space-separated:
#                          rust, go, java, or none (default "rust go java": about 2 GB;
#                          none: about 0.7 GB, Python and Node only; docs/sandbox-image.md)
#
# The images are built FROM $LILYPAD_BASE_IMAGE. When that base image
# is not present locally it is pulled; when pulling fails (a machine with no
# image registry) and debootstrap is installed, an equivalent minimal Debian
# 12 root filesystem is made from Debian packages and imported under the
# same tag. That needs root and access to a Debian package mirror.
set -euo pipefail

readonly BASE_IMAGE="${LILYPAD_BASE_IMAGE:-debian:bookworm-slim}"
readonly SANDBOX_IMAGE="${LILYPAD_SANDBOX_IMAGE:-lilypad-sandbox:latest}"
readonly EGRESS_IMAGE="${LILYPAD_EGRESS_IMAGE:-lilypad-egress:latest}"
readonly REDIS_IMAGE="${LILYPAD_REDIS_IMAGE:-lilypad-redis:latest}"
readonly SANDBOX_TOOLCHAINS="${LILYPAD_SANDBOX_TOOLCHAINS:-rust go java}"
readonly NODE_BASE_IMAGE="lilypad-node:20"
readonly PROJECT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly PULL_TIMEOUT_S=300

IF_MISSING=0
NODE_BASE=0
VERBOSE=0
NODE_CONTEXT=""
STARTED_AT=$SECONDS
PHASE_AT=$SECONDS
ROOTFS=""
LOGFILE=""

# One line per phase: total elapsed seconds, then what happened and how long
# the phase itself took.
phase_done() {
  printf '[images] %4ds  %s (%ds)\n' "$((SECONDS - STARTED_AT))" "$*" "$((SECONDS - PHASE_AT))"
  PHASE_AT=$SECONDS
}

die() {
  printf '[images] %4ds  error: %s\n' "$((SECONDS - STARTED_AT))" "$*" >&2
  exit 1
}

usage() {
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

# Runs a command with its output kept in $LOGFILE (or streamed with
# --verbose). Returns the command's status; on failure the log's tail is
# printed to stderr.
run_logged() {
  local status=0
  if ((VERBOSE)); then
    "$@" || status=$?
    return "$status"
  fi
  if [[ -z $LOGFILE ]]; then
    LOGFILE="$(mktemp "${TMPDIR:-/tmp}/lilypad-images.XXXXXX")"
  fi
  printf '\n$ %s\n' "$*" >>"$LOGFILE"
  "$@" >>"$LOGFILE" 2>&1 || status=$?
  if ((status != 0)); then
    printf '[images] `%s` failed (exit %d); last lines of its output:\n' "$*" "$status" >&2
    tail -n 60 "$LOGFILE" | sed 's/^/    /' >&2
    printf '[images] full log: %s\n' "$LOGFILE" >&2
  fi
  return "$status"
}

image_exists() {
  docker image inspect "$1" >/dev/null 2>&1
}

# The toolchains label of an image (docker/sandbox.Dockerfile sets it), or "none recorded".
sandbox_toolchains() {
  local label
  label="$(docker image inspect --format '{{index .Config.Labels "dev.lilypad.toolchains"}}' "$1" 2>/dev/null || true)"
  echo "${label:-none recorded}"
}

# True for an image this script built from an older sandbox.Dockerfile (no toolchains label) or
# with other toolchains than asked for. An image someone else made under the tag is left alone.
sandbox_outdated() {
  local title
  title="$(docker image inspect --format '{{index .Config.Labels "org.opencontainers.image.title"}}' "$1" 2>/dev/null || true)"
  [[ $title == lilypad-sandbox ]] || return 1
  [[ $(sandbox_toolchains "$1") != "$SANDBOX_TOOLCHAINS" ]]
}

image_size_mb() {
  local bytes
  bytes="$(docker image inspect --format '{{.Size}}' "$1")"
  echo "$((bytes / 1000000)) MB"
}

# Unmounts anything debootstrap may have left mounted inside the root
# filesystem (it mounts proc and sys while installing), then removes it.
remove_rootfs() {
  local dir=$1 mnt
  [[ -n $dir && -d $dir && $dir != / ]] || return 0
  if command -v findmnt >/dev/null 2>&1; then
    while read -r mnt; do
      umount -l "$mnt" 2>/dev/null || true
    done < <(findmnt -rn -o TARGET | awk -v p="$dir/" 'index($0, p) == 1' | sort -r)
  fi
  rm -rf --one-file-system "$dir"
}

cleanup() {
  if [[ -n $ROOTFS ]]; then
    remove_rootfs "$ROOTFS"
    ROOTFS=""
  fi
  if [[ -n $NODE_CONTEXT ]]; then
    rm -rf "$NODE_CONTEXT"
    NODE_CONTEXT=""
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Makes a debootstrap root filesystem look like the official slim image:
# no package caches or lists, no documentation, manuals or translations (and
# dpkg told not to install them later), no files copied from the host.
slim_rootfs() {
  local r=$1
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin
  find "$r/var/lib/apt/lists" -mindepth 1 -maxdepth 1 ! -name partial ! -name lock -exec rm -rf {} +
  mkdir -p "$r/etc/dpkg/dpkg.cfg.d"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in the official slim images: leave documentation out of the image.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  local d
  for d in man groff info lintian linda; do
    if [[ -d $r/usr/share/$d ]]; then
      find "$r/usr/share/$d" -mindepth 1 -delete
    fi
  done
  if [[ -d $r/usr/share/locale ]]; then
    find "$r/usr/share/locale" -mindepth 1 ! -name locale.alias ! -type d -delete
    find "$r/usr/share/locale" -mindepth 1 -type d -empty -delete
  fi
  # debootstrap copies the host's resolver and hostname; Docker provides both.
  rm -f "$r/etc/resolv.conf" "$r/etc/hostname"
}

# Creates image $1 from a debootstrap minbase of Debian 12.
import_base_with_debootstrap() {
  local tag=$1
  if [[ $(id -u) -ne 0 ]]; then
    die "debootstrap needs root to make $tag; run this script as root, or provide $tag yourself"
  fi
  ROOTFS="$(mktemp -d "${TMPDIR:-/var/tmp}/lilypad-rootfs.XXXXXX")"
  run_logged debootstrap --variant=minbase --include=git,ca-certificates bookworm "$ROOTFS" \
    || die "debootstrap failed (it needs a reachable Debian package mirror)"
  slim_rootfs "$ROOTFS"
  run_logged bash -c 'set -o pipefail; tar -C "$1" --numeric-owner -c . | docker import \
      --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --change "CMD [\"bash\"]" - "$2"' import "$ROOTFS" "$tag" \
    || die "docker import of the debootstrap root filesystem failed"
  remove_rootfs "$ROOTFS"
  ROOTFS=""
}

ensure_base_image() {
  if image_exists "$BASE_IMAGE"; then
    phase_done "base: $BASE_IMAGE present locally"
    return
  fi
  local pull_output
  if pull_output="$(timeout "$PULL_TIMEOUT_S" docker pull "$BASE_IMAGE" 2>&1)"; then
    phase_done "base: pulled $BASE_IMAGE"
    return
  fi
  phase_done "base: $BASE_IMAGE not present and docker pull failed: $(tail -n 1 <<<"$pull_output")"
  if ! command -v debootstrap >/dev/null 2>&1; then
    die "base image $BASE_IMAGE is not present and could not be pulled. Provide it by
    - docker pull $BASE_IMAGE  (on a machine that reaches an image registry), or
    - docker load -i <saved-image.tar>  (an image saved elsewhere with docker save), or
    - installing debootstrap (apt-get install debootstrap) and running this script again
      as root: it then builds $BASE_IMAGE from Debian packages."
  fi
  import_base_with_debootstrap "$BASE_IMAGE"
  phase_done "base: imported $BASE_IMAGE from a debootstrap minbase ($(image_size_mb "$BASE_IMAGE"))"
}

build_sandbox_image() {
  # The Dockerfile copies nothing in, so the context is the small docker/
  # folder rather than the whole tree (node_modules included).
  local toolchain
  for toolchain in $SANDBOX_TOOLCHAINS; do
    case $toolchain in
      rust | go | java | none) ;;
      *) die "LILYPAD_SANDBOX_TOOLCHAINS has '$toolchain'; use rust, go, java (space-separated) or none" ;;
    esac
  done
  run_logged docker build \
    --file docker/sandbox.Dockerfile \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --build-arg "TOOLCHAINS=$SANDBOX_TOOLCHAINS" \
    --tag "$SANDBOX_IMAGE" \
    docker \
    || die "docker build of $SANDBOX_IMAGE failed"
  phase_done "sandbox: built $SANDBOX_IMAGE with toolchains: $SANDBOX_TOOLCHAINS ($(image_size_mb "$SANDBOX_IMAGE"))"
}

build_egress_image() {
  # Context docker/ as for the sandbox: the Dockerfile copies docker/egress/.
  run_logged docker build \
    --file docker/egress.Dockerfile \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --tag "$EGRESS_IMAGE" \
    docker \
    || die "docker build of $EGRESS_IMAGE failed"
  phase_done "egress: built $EGRESS_IMAGE ($(image_size_mb "$EGRESS_IMAGE"))"
}

build_redis_image() {
  # Context docker/ as for the others: the Dockerfile copies docker/redis/.
  run_logged docker build \
    --file docker/redis.Dockerfile \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --tag "$REDIS_IMAGE" \
    docker \
    || die "docker build of $REDIS_IMAGE failed"
  phase_done "redis: built $REDIS_IMAGE ($(image_size_mb "$REDIS_IMAGE"))"
}

# The node binary and npm of this machine, if they can run in a Debian 12
# container of the engine's architecture and are new enough for Lilypad.
host_node_problem() {
  local node version arch
  node="$(command -v node 2>/dev/null)" || { echo "node is not on PATH"; return; }
  node="$(readlink -f "$node")"
  [[ $(node -p process.platform) == linux ]] || { echo "$node is not a Linux build"; return; }
  arch="$(node -p process.arch)"
  case "$(docker version --format '{{.Server.Arch}}' 2>/dev/null)" in
    amd64) [[ $arch == x64 ]] || { echo "node is $arch, the engine amd64"; return; } ;;
    arm64) [[ $arch == arm64 ]] || { echo "node is $arch, the engine arm64"; return; } ;;
  esac
  version="$(node -p 'process.versions.node')"
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 18) ? 0 : 1)' \
    || { echo "node is $version; Lilypad needs >= 20.18"; return; }
  [[ -f $(npm_dir)/bin/npm-cli.js ]] || { echo "npm's package folder was not found next to $node"; return; }
}

npm_dir() {
  local npm
  npm="$(readlink -f "$(command -v npm 2>/dev/null || echo /nonexistent)")"
  # .../lib/node_modules/npm/bin/npm-cli.js -> .../lib/node_modules/npm
  dirname "$(dirname "$npm")"
}

build_node_base_image() {
  local problem
  problem="$(host_node_problem)"
  if [[ -n $problem ]]; then
    die "cannot build $NODE_BASE_IMAGE from this machine's node: $problem. Install Node.js >= 20.18
    (Linux, the engine's architecture) with npm, or pull node:20-bookworm-slim and leave
    LILYPAD_NODE_IMAGE unset."
  fi
  NODE_CONTEXT="$(mktemp -d "${TMPDIR:-/tmp}/lilypad-node.XXXXXX")"
  cp "$(readlink -f "$(command -v node)")" "$NODE_CONTEXT/node"
  cp -a "$(npm_dir)" "$NODE_CONTEXT/npm"
  mkdir "$NODE_CONTEXT/local-ca"
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$NODE_CONTEXT/local-ca/"
  fi
  cp docker/node-base.Dockerfile "$NODE_CONTEXT/Dockerfile"
  run_logged docker build \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --tag "$NODE_BASE_IMAGE" \
    "$NODE_CONTEXT" \
    || die "docker build of $NODE_BASE_IMAGE failed"
  rm -rf "$NODE_CONTEXT"
  NODE_CONTEXT=""
  phase_done "node base: built $NODE_BASE_IMAGE with node $(node --version) ($(image_size_mb "$NODE_BASE_IMAGE"))"
}

main() {
  while (($#)); do
    case $1 in
      --if-missing) IF_MISSING=1 ;;
      --node-base) NODE_BASE=1 ;;
      -v | --verbose) VERBOSE=1 ;;
      -h | --help) usage; exit 0 ;;
      *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
  done

  cd "$PROJECT_ROOT"

  command -v docker >/dev/null 2>&1 || die "the docker command is not installed"
  docker info >/dev/null 2>&1 \
    || die "the Docker engine does not answer (docker info failed); start dockerd first"
  phase_done "engine: Docker $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?') answers"

  local want_sandbox=1 want_egress=1 want_redis=1 want_node=$NODE_BASE
  if ((IF_MISSING)) && image_exists "$SANDBOX_IMAGE"; then
    if sandbox_outdated "$SANDBOX_IMAGE"; then
      phase_done "sandbox: $SANDBOX_IMAGE was built by an older sandbox.Dockerfile or with other toolchains ($(sandbox_toolchains "$SANDBOX_IMAGE")); rebuilding"
    else
      want_sandbox=0
      phase_done "sandbox: $SANDBOX_IMAGE already present, not rebuilt (--if-missing)"
    fi
  fi
  if ((IF_MISSING)) && image_exists "$EGRESS_IMAGE"; then
    want_egress=0
    phase_done "egress: $EGRESS_IMAGE already present, not rebuilt (--if-missing)"
  fi
  if ((IF_MISSING)) && image_exists "$REDIS_IMAGE"; then
    want_redis=0
    phase_done "redis: $REDIS_IMAGE already present, not rebuilt (--if-missing)"
  fi
  if ((IF_MISSING && want_node)) && image_exists "$NODE_BASE_IMAGE"; then
    want_node=0
    phase_done "node base: $NODE_BASE_IMAGE already present, not rebuilt (--if-missing)"
  fi
  if ((want_sandbox == 0 && want_egress == 0 && want_redis == 0 && want_node == 0)); then
    printf '[images] %4ds  done, nothing to do\n' "$((SECONDS - STARTED_AT))"
    return 0
  fi

  ensure_base_image
  if ((want_sandbox)); then
    build_sandbox_image
  fi
  if ((want_egress)); then
    build_egress_image
  fi
  if ((want_redis)); then
    build_redis_image
  fi
  if ((want_node)); then
    build_node_base_image
  fi

  if [[ -n $LOGFILE ]]; then
    rm -f "$LOGFILE"
  fi
  printf '[images] %4ds  done\n' "$((SECONDS - STARTED_AT))"
}

# Sourcing the file (for tests) defines the functions without running them.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
