#!/bin/sh
# Entrypoint of the web and worker services in docker/compose.yml: `lilypad-compose web|worker`.
#
# Settings and the app's credentials live in LILYPAD_ENV_FILE on the shared config volume. Before
# registration that file does not exist yet: the web role creates it (empty, 0600) and serves the
# registration pages, which write the credentials into it. A worker cannot run without them, so it
# waits here until the file (or its environment) has an APP_ID instead of exiting and being
# restarted over and over.
set -eu

role="${1:-}"
file="${LILYPAD_ENV_FILE:-}"

has_app_id() {
  [ -n "${APP_ID:-}" ] || { [ -n "$file" ] && [ -f "$file" ] && grep -Eq '^[[:space:]]*(export[[:space:]]+)?APP_ID=[[:space:]]*["'"'"']?[0-9]' "$file"; }
}

case "$role" in
  web | start)
    if [ -n "$file" ] && [ ! -e "$file" ]; then
      mkdir -p "$(dirname "$file")"
      (umask 077 && : >"$file")
    fi
    ;;
  worker)
    if ! has_app_id; then
      echo "lilypad-compose: waiting for the GitHub App's credentials in ${file:-APP_ID}: register the app with the setup link the web service logs (/setup?token=...)" >&2
      # A stop request while waiting ends the container at once (PID 1 has no default SIGTERM action).
      trap 'exit 0' TERM INT
      while ! has_app_id; do
        sleep 2 &
        wait $! || true
      done
      trap - TERM INT
      echo "lilypad-compose: credentials found, starting the worker" >&2
    fi
    ;;
esac
exec node /app/bin/lilypad.js "$@"
