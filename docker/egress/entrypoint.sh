#!/bin/sh
# Starts Squid for Lilypad. The run's policy arrives base64-encoded in the
# environment (a read-only root takes no files after start): it is written to
# the tmpfs that the static configuration includes from.
set -eu

readonly dir=/run/lilypad-egress

if [ -z "${LILYPAD_EGRESS_POLICY:-}" ]; then
  echo "lilypad-egress: LILYPAD_EGRESS_POLICY is empty; this image is started by Lilypad, which sets it" >&2
  exit 64
fi
printf '%s' "$LILYPAD_EGRESS_POLICY" | base64 -d >"$dir/policy.conf"
printf '%s' "${LILYPAD_EGRESS_HOSTS:-}" | base64 -d >"$dir/hosts"
unset LILYPAD_EGRESS_POLICY LILYPAD_EGRESS_HOSTS

# Refuse to start on a policy Squid would only warn about.
squid -k parse -f /etc/squid/lilypad.conf 2>"$dir/parse.log" || { cat "$dir/parse.log" >&2; exit 65; }
exec squid -N -f /etc/squid/lilypad.conf
