#!/usr/bin/env bash
# Registers gVisor (runsc) with the local Docker engine as the runtime `runsc`, so that
# LILYPAD_SANDBOX_RUNTIME=runsc can run the sandboxes under it. Idempotent: installs runsc only if
# it is missing, adds or updates only its own entry under "runtimes" in daemon.json (every other
# key is kept), reloads dockerd with SIGHUP only when the file changed, and waits until
# `docker info` lists the runtime.
#
#   bash scripts/setup-runsc.sh            # as root, with dockerd running
#
# Settings: RUNSC_RUNTIME_NAME (default runsc), RUNSC_PLATFORM (default ptrace: kvm needs
# /dev/kvm and hangs under nested virtualisation), DOCKER_DAEMON_JSON (default /etc/docker/daemon.json).
set -euo pipefail

name=${RUNSC_RUNTIME_NAME:-runsc}
platform=${RUNSC_PLATFORM:-ptrace}
daemon_json=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
say() { echo "setup-runsc: $*" >&2; }

if ! command -v runsc >/dev/null 2>&1; then
  say "installing runsc (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y runsc >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y runsc >/dev/null; }
fi
runsc_path=$(command -v runsc)
say "$("$runsc_path" --version 2>/dev/null | head -1)"

mkdir -p "$(dirname "$daemon_json")"
# --network=host: this runsc release takes every network namespace for the host's and refuses to
# start with its own network stack; with host, it uses the namespace Docker made for the container
# (none, or the run's internal setup network), so Docker's isolation still decides what it reaches,
# and disconnecting a network (the agent phase) takes effect inside the sandbox at once.
changed=$(RUNSC_PATH="$runsc_path" NAME="$name" PLATFORM="$platform" FILE="$daemon_json" node --input-type=module -e '
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
const { RUNSC_PATH, NAME, PLATFORM, FILE } = process.env;
let config = {};
if (existsSync(FILE)) {
  const text = readFileSync(FILE, "utf8");
  if (text.trim() !== "") {
    try { config = JSON.parse(text); } catch (err) { console.error(`setup-runsc: ${FILE} is not valid JSON (${err.message}); fix it by hand first`); process.exit(1); }
  }
  if (config === null || typeof config !== "object" || Array.isArray(config)) { console.error(`setup-runsc: ${FILE} is not a JSON object; fix it by hand first`); process.exit(1); }
}
const wanted = { path: RUNSC_PATH, runtimeArgs: [`--platform=${PLATFORM}`, "--network=host"] };
const runtimes = config.runtimes ?? {};
if (JSON.stringify(runtimes[NAME]) === JSON.stringify(wanted)) { console.log("unchanged"); process.exit(0); }
config.runtimes = { ...runtimes, [NAME]: wanted };
writeFileSync(`${FILE}.lilypad-tmp`, `${JSON.stringify(config, null, 2)}\n`);
renameSync(`${FILE}.lilypad-tmp`, FILE);
console.log("changed");
')

listed() { docker info --format '{{json .Runtimes}}' 2>/dev/null | NAME="$name" node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{process.exit(Object.hasOwn(JSON.parse(s),process.env.NAME)?0:1)}catch{process.exit(1)}})'; }

if [ "$changed" = changed ] || ! listed; then
  say "runtime $name written to $daemon_json; reloading dockerd"
  pids=$(pidof dockerd || true)
  if [ -n "$pids" ]; then
    kill -HUP $pids
  elif command -v systemctl >/dev/null 2>&1; then
    systemctl reload docker
  else
    say "no dockerd process found: start dockerd, then run this script again"
    exit 1
  fi
fi

for _ in $(seq 1 60); do
  if listed; then
    say "docker info lists runtime $name (platform $platform)"
    exit 0
  fi
  sleep 0.5
done
say "docker info does not list runtime $name 30 s after the reload; see dockerd's log"
exit 1
