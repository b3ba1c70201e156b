#!/usr/bin/env bash
# Runs before `npm start`: installs the dependencies on a fresh checkout and builds the sandbox
# image when it is missing, so that `npm start` is the one command that starts Lilypad.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ! -d node_modules/tsx ]]; then
  echo "lilypad: installing dependencies (npm ci)..."
  npm ci --no-audit --no-fund
fi
bash docker/build-images.sh --if-missing
