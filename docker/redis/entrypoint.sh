#!/bin/sh
# Starts redis-server with the arguments `docker run` appended: options (--port 6380 ...), a config
# file (/data/redis.conf [options]), or a command line that already starts with redis-server.
# Anything else (redis-cli, sh) runs as given, for debugging and health checks.
set -eu

case "${1:-}" in
  redis-server) shift ;;
  '' | -* | *.conf) ;;
  *) exec "$@" ;;
esac
# exec: redis-server is PID 1 and gets SIGTERM itself (it writes the append-only file and exits).
exec redis-server "$@"
