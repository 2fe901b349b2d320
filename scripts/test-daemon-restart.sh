#!/usr/bin/env bash
# `kill -9` of the daemon in the middle of a rollout, then `serve` again: the rollout
# completes, and the cloud holds no duplicate object. Then the store is lost (a fresh state
# directory): the new daemon holds the cluster on ForeignObjects and creates nothing, and
# `apply --adopt` takes the earlier cluster's UID, and so its objects, over. The cloud must outlive the daemon,
# so it is the simulator served over HTTP (`flightdeck sim serve`), reached as a real
# OpenStack through clouds.yaml, and its workload cluster through the kubeconfig the
# simulator writes (`spec.workload.kubeconfig`), as a real one would be; its servers are
# counted with openstacksdk (in the virtualenv scripts/conformance.sh also uses).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib-openstacksdk.sh
. scripts/lib-openstacksdk.sh
# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
cloud=
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; [ -n "$cloud" ] && kill "$cloud" 2>/dev/null; rm -rf "$work"' EXIT

"$fd" sim serve --listen 127.0.0.1:0 --clouds-file "$work/clouds.yaml" --speed 10 \
  --kubernetes 127.0.0.1:0 --kubeconfig-dir "$work/kube" > "$work/sim.log" 2>&1 &
cloud=$!
for _ in $(seq 1 100); do [ -s "$work/clouds.yaml" ] && break; sleep 0.1; done
[ -s "$work/clouds.yaml" ] || { cat "$work/sim.log"; echo "sim serve did not start"; exit 1; }
export OS_CLIENT_CONFIG_FILE=$work/clouds.yaml

# The example, on the served simulator, without the operator's router (sim serve has none),
# its nodes read through the workload cluster's kubeconfig (written once its API is up).
sed 's/cloud: sim$/cloud: flightdeck-sim/; /router: demo-router/d' examples/openstack.yaml > "$work/v1.yaml"
printf '  workload:\n    kubeconfig: %s\n  bootstrap: {provider: none}\n' "$work/kube/demo.kubeconfig" >> "$work/v1.yaml"
sed 's/ubuntu-2204-kube-v1.30.2/ubuntu-2204-kube-v1.30.3/g; s/version: v1.30.2/version: v1.30.3/' "$work/v1.yaml" > "$work/v2.yaml"

start_serve --no-sim
"$fd" apply -f "$work/v1.yaml"
wait_for 300 phase_is demo Ready || fail "demo not Ready"
echo "ok: demo Ready on the served simulator"
"$fd" apply -f "$work/v2.yaml"
# Mid-rollout: a new machine is being made, old ones still stand.
new_machine() {
  "$fd" get cluster demo -o json | python3 -c "
import json,sys; d=json.load(sys.stdin); st=d['status']
ms=st['controlPlane']['machines']+[m for p in st['nodePools'] for m in p['machines']]
sys.exit(0 if any(m['image'].endswith('v1.30.3') for m in ms) and any(m['image'].endswith('v1.30.2') for m in ms) else 1)"
}
wait_for 300 new_machine || fail "the rollout did not start"
kill -9 "$server"; wait "$server" 2>/dev/null || true; server=
echo "ok: serve killed with SIGKILL in the middle of the rollout"
start_serve --no-sim
wait_for 900 up_to_date demo ubuntu-2204-kube-v1.30.3 || fail "the rollout did not complete after the restart"
echo "ok: the rollout completed after the restart"
no_duplicates() {
  "$venv/bin/python" - <<'PY'
import collections, openstack
c = openstack.connect(cloud="flightdeck-sim")
servers = list(c.compute.servers(details=True, tags="flightdeck-cluster=demo"))
names = collections.Counter(s.name for s in servers)
dups = [n for n, k in names.items() if k > 1]
assert not dups, f"duplicate servers: {dups}"
cps = [s for s in servers if "-cp-" in s.name]
wks = [s for s in servers if "-workers-" in s.name]
assert len(cps) == 3 and len(wks) == 2, sorted(names)
lbs = list(c.load_balancer.load_balancers(tags="flightdeck-cluster=demo"))
assert len(lbs) == 1, [lb.name for lb in lbs]
groups = list(c.network.security_groups(tags="flightdeck-cluster=demo"))
assert len(groups) == 1, [g.name for g in groups]
print(f"ok: no duplicate object: {sorted(names)}, 1 load balancer, 1 security group")
PY
}
no_duplicates
"$fd" events demo --limit 1000 > "$work/events.txt"
grep -q "SimulatorRestarted" "$work/events.txt" && fail "a real cloud's cluster was rebuilt"
uid=$("$fd" get cluster demo -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['uid'])")
stop_serve

echo "== the store is lost: serve on a fresh state directory, the same spec applied"
export FLIGHTDECK_STATE_DIR=$work/state-lost
start_serve --no-sim
"$fd" apply -f "$work/v2.yaml"
held() {
  "$fd" get cluster demo -o json | python3 -c "
import json,sys; d=json.load(sys.stdin)
c=[c for c in d['status']['conditions'] if c['type']=='ForeignObjects' and c['status']]
sys.exit(0 if c and '$uid' in c[0]['message'] and not d['ready'] else 1)"
}
wait_for 120 held || fail "the new cluster did not hold on the earlier cluster's objects"
sleep 3
no_duplicates
echo "ok: held on ForeignObjects naming UID $uid; nothing was created"
"$fd" apply -f "$work/v2.yaml" --adopt
wait_for 300 phase_is demo Ready || fail "the adopted cluster did not become Ready"
adopted=$("$fd" get cluster demo -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['uid'])")
[ "$adopted" = "$uid" ] || fail "adopted UID $adopted, not $uid"
"$fd" events demo --limit 1000 | grep -q ClusterAdopted || fail "no ClusterAdopted event"
echo "ok: --adopt took UID $uid over"
stop_serve
echo "5 passed, 0 failed"
