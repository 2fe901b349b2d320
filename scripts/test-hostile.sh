#!/usr/bin/env bash
# A hostile but legitimate client against a real `flightdeck serve`, over plain HTTP and
# over TLS, on loopback only (127.0.0.1, and 127.0.0.2 as a second client address).
# scripts/hostile.py holds the probes; every loop in it is bounded in count and time.
# Installs what it needs: jsonschema, in a virtualenv under target/, to check error
# answers against the OpenAPI document; the certificates are made here with openssl.
set -euo pipefail
cd "$(dirname "$0")/.."

JSONSCHEMA_VERSION=4.23.0
venv=target/hostile-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import jsonschema" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "jsonschema==$JSONSCHEMA_VERSION"
fi

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# The probes open a few thousand sockets of their own.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# Short timeouts, so a probe sees them act within its own bounded wait; the caps as the
# defaults would have them, only smaller, so a probe reaches them quickly.
HEADER_TIMEOUT=4
PER_ADDRESS=200
STREAMS_PER_TOKEN=32
limits=(--header-timeout "${HEADER_TIMEOUT}s" --idle-timeout 10s --max-connections 1024
  --max-connections-per-address "$PER_ADDRESS" --max-streams-per-token "$STREAMS_PER_TOKEN")

# A CA and a leaf certificate for localhost and 127.0.0.1, signed by it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=flightdeck test CA" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$work/ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/ext" -out "$work/tls.pem" 2>/dev/null

probe() {
  local ca=()
  [ $# -gt 0 ] && ca=(--ca "$1")
  "$venv/bin/python" scripts/hostile.py --url "$(url)" --admin "$(admin)" \
    --viewer "$(cat "$FLIGHTDECK_STATE_DIR/viewer.token")" --pid "$server" \
    --header-timeout "$HEADER_TIMEOUT" --per-address "$PER_ADDRESS" \
    --streams-per-token "$STREAMS_PER_TOKEN" "${ca[@]}" || fail "a probe failed (above)"
}

echo "== serve over plain HTTP"
start_serve "${limits[@]}" --sim-speed 20
[ "$(stat -c %a "$FLIGHTDECK_STATE_DIR/flightdeck.redb")" = 600 ] || fail "flightdeck.redb is not mode 0600"
echo "ok: the store file is mode 0600"
# A cluster being built, so that the event history and the streams carry events.
"$fd" apply -f examples/openstack.yaml > /dev/null || fail "apply of the example"
probe
stop_serve

echo "== serve over TLS"
start_serve "${limits[@]}" --tls-cert "$work/tls.pem" --tls-key "$work/tls.key"
probe "$work/ca.pem"
stop_serve
echo "hostile: every probe held, over HTTP and over TLS"
