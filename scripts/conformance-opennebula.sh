#!/usr/bin/env bash
# Conformance: OpenNebula's own Python bindings (pyone) against `flightdeck sim serve
# --opennebula`. Creates its own virtualenv (pyone pinned) under target/, builds
# flightdeck, serves the simulator on loopback, runs the suite, and stops the server on
# exit.
set -euo pipefail
cd "$(dirname "$0")/.."

# pyone for OpenNebula 6.10 (the release line flightdeck targets).
PYONE_VERSION=6.10.5
venv=target/conformance-one-venv
if [ ! -x "$venv/bin/python" ] \
  || [ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('pyone'))" 2>/dev/null)" != "$PYONE_VERSION" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "pyone==$PYONE_VERSION"
fi

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
endpoint_file="$work/one_xmlrpc"
# Virtual time runs 10x the wall clock, so image copies and VM boots take seconds.
"$fd" sim serve --listen 127.0.0.1:0 --clouds-file "$work/clouds.yaml" \
  --opennebula 127.0.0.1:0 --one-auth-file "$work/one_auth" --one-xmlrpc-file "$endpoint_file" \
  --speed 10 > "$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

# The endpoint file is the last one serve writes, once every listener is bound.
for _ in $(seq 1 100); do
  [ -s "$endpoint_file" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
[ -s "$endpoint_file" ] || { cat "$work/serve.log"; echo "sim serve --opennebula did not start"; exit 1; }

# The credentials are in a file only the owner reads, and never in serve's output.
[ "$(stat -c %a "$work/one_auth")" = 600 ] || { echo "the ONE_AUTH file is not mode 0600"; exit 1; }
if grep -qF "$(cat "$work/one_auth")" "$work/serve.log"; then
  echo "sim serve printed the OpenNebula password"; exit 1
fi

ONE_XMLRPC=$(cat "$endpoint_file") ONE_AUTH="$work/one_auth" SIM_SPEED=10 \
  "$venv/bin/python" tests/conformance/pyone_conformance.py
