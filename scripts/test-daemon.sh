#!/usr/bin/env bash
# End to end: a real `flightdeck serve` process with the embedded simulator, driven by
# the `flightdeck` CLI as a user would. Checks every claim against the simulator's own
# records (`/api/v1/sim/objects`), scrapes /metrics through promtool and validates the
# OpenAPI document with openapi-spec-validator. Installs what it needs: Debian's
# `prometheus` (promtool) and, in a virtualenv under target/, openapi-spec-validator.
set -euo pipefail
cd "$(dirname "$0")/.."

SPEED=${SPEED:-20}
bash scripts/need-package.sh promtool prometheus
OSV_VERSION=0.7.1
venv=target/openapi-venv
if [ ! -x "$venv/bin/openapi-spec-validator" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openapi-spec-validator==$OSV_VERSION"
fi

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG
follower=
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
cleanup() {
  [ -n "$follower" ] && kill "$follower" 2>/dev/null || true
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
# nothing_left NAME: the simulator holds no object of the cluster and no route at all.
nothing_left() {
  api "/api/v1/sim/objects/$1" | python3 -c "
import json,sys
d=json.load(sys.stdin)
left={k:v for k,v in d['objects'].items() if v}
sys.exit(0 if not left and not d['routes'] else 1)"
}

echo "== serve with no cloud: the embedded simulator (${SPEED}x real time)"
start_serve --sim-speed "$SPEED"
grep -q "admin token in $FLIGHTDECK_STATE_DIR/admin.token" "$work/serve.log" || fail "serve did not say where the admin token is"
[ "$(stat -c %a "$FLIGHTDECK_STATE_DIR/admin.token")" = 600 ] || fail "admin.token is not mode 0600"
ok "serve says where its API and admin token are; the token file is 0600"

# A second daemon on the same state directory is refused.
if "$fd" serve --listen 127.0.0.1:0 > "$work/second.log" 2>&1; then fail "a second serve on the same state dir started"; fi
grep -q "in use by another flightdeck process" "$work/second.log" || fail "the refusal does not say why: $(cat "$work/second.log")"
ok "a second serve on the same state directory is refused"
if FLIGHTDECK_STATE_DIR=$work/other "$fd" serve --listen 0.0.0.0:0 > "$work/open.log" 2>&1; then fail "listened on 0.0.0.0 without TLS"; fi
grep -q "without TLS" "$work/open.log" || fail "the refusal does not say why"
ok "a non-loopback listen without TLS is refused with the reason"

echo "== apply, get, describe (OpenStack)"
"$fd" apply -f examples/openstack.yaml | grep -q "cluster/demo created" || fail "apply"
wait_for 180 phase_is demo Ready || fail "demo not Ready within 3 minutes"
"$fd" get clusters | grep -E "^demo +sim/openstack +Ready +3/3 +2/2" || fail "get clusters"
"$fd" describe cluster demo > "$work/describe.txt"
grep -q "ControlPlane/control-plane" "$work/describe.txt" && grep -q "Member" "$work/describe.txt" \
  && grep -q "NodePool/workers" "$work/describe.txt" || fail "describe shows no tree: $(cat "$work/describe.txt")"
ok "demo is Ready; get and describe show it"

echo "== a fault in the simulator, repaired by the daemon"
"$fd" events demo --follow --limit 1 > "$work/events.txt" 2>&1 &
follower=$!
sleep 1
"$fd" sim fault neutron.ruleLost --cluster demo --count 2 | grep -q "neutron.ruleLost" || fail "sim fault"
"$fd" plan demo > "$work/plan.txt"
grep -q "create ingress rule" "$work/plan.txt" || fail "plan does not show the repair: $(cat "$work/plan.txt")"
grep -q "budget control-plane" "$work/plan.txt" || fail "plan shows no budget"
ok "plan shows the repair the daemon is about to make, with its reason and budget"
wait_for 300 grep -q CreateSecurityGroupRule "$work/events.txt" || fail "the lost rules were not restored"
ok "events --follow showed the repair as it happened"
kill "$follower"; follower=
api /metrics > "$work/metrics.txt"
grep -E '^flightdeck_repairs_started_total\{rule="F4"\} [1-9]' "$work/metrics.txt" || fail "metrics do not count the F4 repair"
promtool check metrics < "$work/metrics.txt" || fail "promtool check metrics"
ok "/metrics counts the repair and passes promtool check metrics"
api /api/v1/openapi.json > "$work/openapi.json"
"$venv/bin/openapi-spec-validator" "$work/openapi.json" || fail "openapi-spec-validator"
ok "the OpenAPI document is valid"

echo "== a rollout by apply (F2 gate)"
sed 's/ubuntu-2204-kube-v1.30.2/ubuntu-2204-kube-v1.30.3/g; s/version: v1.30.2/version: v1.30.3/' examples/openstack.yaml > "$work/v2.yaml"
"$fd" apply -f "$work/v2.yaml" | grep -q "cluster/demo configured" || fail "apply v2"
wait_for 600 up_to_date demo ubuntu-2204-kube-v1.30.3 || fail "the rollout did not finish"
api "/api/v1/clusters/demo/events?limit=1000" | grep -q "MemberChanged" || fail "no member gate events"
ok "the new image rolled out"

echo "== viewer token: may look, may not change"
viewer=$(cat "$FLIGHTDECK_STATE_DIR/viewer.token")
code=$(curl -s -o /dev/null -w "%{http_code}" "$(url)/api/v1/clusters")
[ "$code" = 401 ] || fail "no token: $code"
code=$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $viewer" -X DELETE "$(url)/api/v1/clusters/demo")
[ "$code" = 403 ] || fail "viewer delete: $code"
code=$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $viewer" -H 'content-type: application/json' \
  -d '{"kind":"neutron.ruleLost","cluster":"demo"}' "$(url)/api/v1/sim/faults")
[ "$code" = 403 ] || fail "viewer fault: $code"
ok "no token: 401; a viewer token: 403 on delete and on breaking the simulator"

echo "== delete --wait leaves nothing in the simulated cloud"
"$fd" delete cluster demo --wait --timeout 10m || fail "delete --wait"
nothing_left demo || fail "demo left objects: $(api /api/v1/sim/objects/demo)"
ok "demo is gone, and the simulator holds nothing of it"

# A rollout on each: KubeVirt to a new container disk, OpenNebula to new template content
# (a new content-addressed template, never an update of the shared one).
sed 's|quay.io/containerdisks/ubuntu:22.04|quay.io/containerdisks/ubuntu:24.04|g' examples/kubevirt.yaml > "$work/kubevirt-v2.yaml"
sed 's/CPU = "2"/CPU = "3"/' examples/opennebula.yaml > "$work/opennebula-v2.yaml"
for f in opennebula kubevirt; do
  name=$(awk '/^  name:/ {print $2; exit}' "examples/$f.yaml")
  echo "== $f: apply, Ready, a rollout by apply, delete"
  "$fd" apply -f "examples/$f.yaml" | grep -q "cluster/$name created" || fail "apply $f"
  wait_for 300 phase_is "$name" Ready || fail "$name not Ready"
  "$fd" apply -f "$work/$f-v2.yaml" | grep -q "cluster/$name configured" || fail "apply $f v2"
  wait_for 600 up_to_date "$name" || fail "$name: the rollout did not finish"
  api "/api/v1/clusters/$name/events?limit=1000" | grep -q "RolloutStarted" || fail "$name: no RolloutStarted event"
  "$fd" delete cluster "$name" --wait --timeout 10m || fail "delete $name"
  nothing_left "$name" || fail "$name left objects: $(api "/api/v1/sim/objects/$name")"
  ok "$f: $name built, rolled to a new machine template, then deleted with nothing left"
done

echo "== SIGTERM: exit 0 within 30 s"
"$fd" apply -f examples/openstack.yaml > /dev/null
sleep 2
stop_serve
ok "serve stopped on SIGTERM and exited 0"

echo "== the token never appears in a log"
for f in "$work"/*.log "$work"/*.txt; do
  if grep -qF "$(admin)" "$f" || grep -qF "$viewer" "$f"; then fail "a token appears in $f"; fi
done
ok "no token in any log or output"

echo "$pass passed, 0 failed"
