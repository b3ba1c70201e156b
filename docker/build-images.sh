#!/usr/bin/env bash
# Builds Lilypad's images (run as `npm run images`): the sandbox, then the
# egress proxy that setup commands reach the network through.
#
#   bash docker/build-images.sh [--if-missing] [--verbose]
#
#   --if-missing  build only the images whose tag does not exist yet
#   --verbose     stream the output of docker/debootstrap instead of keeping
#                 it in a log file (the log's tail is printed on failure)
#
# Environment:
#   LILYPAD_SANDBOX_IMAGE  sandbox tag to build (default lilypad-sandbox:latest)
#   LILYPAD_EGRESS_IMAGE   egress proxy tag to build (default lilypad-egress:latest)
#
# Both images are built FROM debian:bookworm-slim. When that base image
# is not present locally it is pulled; when pulling fails (a machine with no
# image registry) and debootstrap is installed, an equivalent minimal Debian
# 12 root filesystem is made from Debian packages and imported under the
# same tag. That needs root and access to a Debian package mirror.
set -euo pipefail

readonly BASE_IMAGE="debian:bookworm-slim"
readonly SANDBOX_IMAGE="${LILYPAD_SANDBOX_IMAGE:-lilypad-sandbox:latest}"
readonly EGRESS_IMAGE="${LILYPAD_EGRESS_IMAGE:-lilypad-egress:latest}"
readonly PROJECT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly PULL_TIMEOUT_S=300

IF_MISSING=0
VERBOSE=0
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
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
  run_logged docker build \
    --file docker/sandbox.Dockerfile \
    --tag "$SANDBOX_IMAGE" \
    docker \
    || die "docker build of $SANDBOX_IMAGE failed"
  phase_done "sandbox: built $SANDBOX_IMAGE ($(image_size_mb "$SANDBOX_IMAGE"))"
}

build_egress_image() {
  # Context docker/ as for the sandbox: the Dockerfile copies docker/egress/.
  run_logged docker build \
    --file docker/egress.Dockerfile \
    --tag "$EGRESS_IMAGE" \
    docker \
    || die "docker build of $EGRESS_IMAGE failed"
  phase_done "egress: built $EGRESS_IMAGE ($(image_size_mb "$EGRESS_IMAGE"))"
}

main() {
  while (($#)); do
    case $1 in
      --if-missing) IF_MISSING=1 ;;
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

  local want_sandbox=1 want_egress=1
  if ((IF_MISSING)) && image_exists "$SANDBOX_IMAGE"; then
    want_sandbox=0
    phase_done "sandbox: $SANDBOX_IMAGE already present, not rebuilt (--if-missing)"
  fi
  if ((IF_MISSING)) && image_exists "$EGRESS_IMAGE"; then
    want_egress=0
    phase_done "egress: $EGRESS_IMAGE already present, not rebuilt (--if-missing)"
  fi
  if ((want_sandbox == 0 && want_egress == 0)); then
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

  if [[ -n $LOGFILE ]]; then
    rm -f "$LOGFILE"
  fi
  printf '[images] %4ds  done\n' "$((SECONDS - STARTED_AT))"
}

# Sourcing the file (for tests) defines the functions without running them.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
