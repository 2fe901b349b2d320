#!/usr/bin/env bash
# Conformance: OpenStack's own SDK against `flightdeck sim serve`.
# Creates its own virtualenv (openstacksdk pinned) under target/, builds flightdeck,
# serves the simulator on loopback, runs the suite, and stops the server on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib-openstacksdk.sh
. scripts/lib-openstacksdk.sh

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
clouds="$work/clouds.yaml"
"$fd" sim serve --listen 127.0.0.1:0 --clouds-file "$clouds" > "$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

for _ in $(seq 1 100); do
  [ -s "$clouds" ] && break
  sleep 0.1
done
[ -s "$clouds" ] || { cat "$work/serve.log"; echo "sim serve did not start"; exit 1; }

OS_CLIENT_CONFIG_FILE="$clouds" OS_CLOUD=flightdeck-sim "$venv/bin/python" tests/conformance/openstacksdk_conformance.py
