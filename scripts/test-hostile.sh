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
  [ -n "${KEEP:-}" ] || rm -rf "$work"
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
    --streams-per-token "$STREAMS_PER_TOKEN" "${ca[@]}" | tee "$work/probe.log" ||
    fail "a probe failed: $(grep '^FAIL' "$work/probe.log" || echo 'it exited before naming its check (above)')"
}

echo "== serve over plain HTTP"
start_serve "${limits[@]}" --sim-speed 20
[ "$(stat -c %a "$FLIGHTDECK_STATE_DIR/flightdeck.redb")" = 600 ] || fail "flightdeck.redb is not mode 0600"
echo "ok: the store file is mode 0600"
# A cluster being built, so that the event history and the streams carry events.
"$fd" apply -f examples/openstack.yaml > /dev/null || fail "apply of the example"
probe

echo "== faults, a deleting cluster, generations, user data, as a user of the CLI meets them"
# A fault's parameters are checked: a rate of -1 or 1e308 is refused, naming the field.
for rate in -1 1e308; do
  if out=$("$fd" sim fault api.errorRate --cluster demo --rate="$rate" 2>&1); then fail "rate $rate accepted: $out"; fi
  grep -q "rate" <<< "$out" || fail "the refusal of rate $rate does not name the field: $out"
done
echo "ok: a fault's rate of -1 or 1e308 is refused, naming the field"
# A fault is stopped before its end, once.
id=$("$fd" sim fault octavia.memberOffline --cluster demo --for 1h -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['id'])")
"$fd" sim fault --stop "$id" | grep -q "stopped" || fail "sim fault --stop $id"
api /api/v1/sim/faults | python3 -c "
import json,sys; sys.exit(1 if any(f['id']==$id for f in json.load(sys.stdin)['active']) else 0)" \
  || fail "a stopped fault is still listed"
if "$fd" sim fault --stop "$id" > /dev/null 2>&1; then fail "a fault stopped twice"; fi
echo "ok: a fault is stopped before its end (sim fault --stop), and only once"
# A viewer does not read user data; the admin does.
secret=$(python3 -c "import secrets; print(secrets.token_hex(8))")
python3 -c "
import sys
t=sys.stdin.read().replace('name: demo','name: ud').replace('demo-nodes','ud-nodes').replace('10.244.0.0/16','10.246.0.0/16')
t=t.replace('      image: ubuntu-2204-kube-v1.30.2\n  nodePools:', '      image: ubuntu-2204-kube-v1.30.2\n      userData:\n        content: \"#cloud-config\\nruncmd: [echo $secret]\\n\"\n  bootstrap: {provider: none}\n  nodePools:', 1)
assert '$secret' in t
print(t)" < examples/openstack.yaml > "$work/ud.yaml"
"$fd" apply -f "$work/ud.yaml" > /dev/null || fail "apply of a cluster with user data"
viewer=$(cat "$FLIGHTDECK_STATE_DIR/viewer.token")
curl -sf -H "Authorization: Bearer $viewer" "$(url)/api/v1/clusters/ud" > "$work/ud.viewer.json" || fail "a viewer's GET"
grep -q "$secret" "$work/ud.viewer.json" && fail "a viewer read the user data's content"
grep -q '"size"' "$work/ud.viewer.json" || fail "a viewer does not see the user data's size"
api /api/v1/clusters/ud | grep -q "$secret" || fail "the admin does not read the user data"
echo "ok: a viewer sees the user data's size and SHA-256, the admin its content"
# A cluster being deleted takes no spec, not even its own; its successor starts at 1.
"$fd" apply -f "$work/ud.yaml" > /dev/null
"$fd" delete cluster ud > /dev/null || fail "delete ud"
code=$(curl -s -o "$work/409.json" -w '%{http_code}' -H "Authorization: Bearer $(admin)" \
  -H 'Content-Type: application/yaml' --data-binary @"$work/ud.yaml" "$(url)/api/v1/clusters")
[ "$code" = 409 ] || fail "the same spec applied to a deleting cluster answered $code: $(cat "$work/409.json")"
echo "ok: an identical spec applied to a deleting cluster is refused (409)"
wait_for 300 sh -c "! \"$fd\" get cluster ud > /dev/null 2>&1" || fail "ud was not deleted within 5 minutes"
"$fd" apply -f "$work/ud.yaml" > /dev/null
gen=$("$fd" get cluster ud -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['generation'])")
[ "$gen" = 1 ] || fail "a cluster made again under an old name starts at generation $gen"
echo "ok: a cluster made again under its old name starts at generation 1"
"$fd" delete cluster ud > /dev/null
stop_serve

echo "== serve over TLS"
start_serve "${limits[@]}" --tls-cert "$work/tls.pem" --tls-key "$work/tls.key"
probe "$work/ca.pem"
# The CLI says how to trust the daemon's CA, and trusts it when told.
if out=$("$fd" get clusters 2>&1); then fail "the CLI trusted an unknown CA"; fi
grep -q -- "--ca-file" <<< "$out" || fail "the CLI does not say how to trust the certificate: $out"
"$fd" get clusters --ca-file "$work/ca.pem" > /dev/null || fail "the CLI with --ca-file"
echo "ok: the CLI refuses the unknown CA and says to pass --ca-file; with it, it connects"
stop_serve

echo "== serve on every address: api.url names the loopback one"
rm -f "$FLIGHTDECK_STATE_DIR/api.url"
"$fd" serve --listen 0.0.0.0:0 --insecure "${limits[@]}" >> "$work/serve.log" 2>&1 &
server=$!
wait_for 30 test -s "$FLIGHTDECK_STATE_DIR/api.url" || fail "serve on 0.0.0.0 did not start"
grep -q '^http://127\.0\.0\.1:' "$FLIGHTDECK_STATE_DIR/api.url" || fail "api.url is $(cat "$FLIGHTDECK_STATE_DIR/api.url")"
"$fd" get clusters > /dev/null || fail "the CLI cannot reach the daemon by api.url"
echo "ok: listening on 0.0.0.0, api.url names 127.0.0.1 and the CLI reaches it"
stop_serve
echo "hostile: every probe held, over HTTP and over TLS"
