#!/usr/bin/env bash
# The real-OpenStack suite: the flightdeck daemon against Debian's OpenStack Zed
# services on loopback (../shared/openstack/up.sh), driven through the CLI. `serve`
# runs without the embedded simulator; `apply` builds a cluster (3 control-plane + 2
# workers), a second `apply` rolls it to a new image, `delete cluster --wait` removes it;
# each step is checked with openstacksdk. Nova's fake driver boots no kubelet, so the
# workload cluster is played by `sim serve --kubernetes --kubelets-for fdstack`: its
# kubelets register by the real server IDs (`openstack:///<id>`), and flightdeck reads
# them through the cluster's kubeconfig (spec.workload.kubeconfig), as on a real cluster.
# One server's kubelet never starts: it is replaced (F3). Each node's pod CIDR is routed
# on the router (F7). A second cluster, `kd`, boots with kubeadm: its init machine's user
# data is read back from Nova and checked to be flightdeck's kubeadm init document (its
# API never answers: no machine runs cloud-init here), then it is deleted. Services are
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=$(cd ../shared/openstack && pwd)
export FDSTACK_DIR=${FDSTACK_DIR:-/tmp/fdstack}
t0=$(date +%s)
# Build first: adminrc sets its own PATH.
# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
routes_match() { /usr/bin/python3 tests/real/verify.py routes demo fd-router 10.244.0.0/16 >/dev/null 2>&1; }
kubelets=
trap '[ -n "$server" ] && kill -9 "$server" 2>/dev/null; [ -n "$kubelets" ] && kill "$kubelets" 2>/dev/null; bash "$shared/down.sh" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash "$shared/up.sh"
# shellcheck disable=SC1091
. "$FDSTACK_DIR/adminrc"
export PATH="/usr/bin:$PATH"  # Debian's python has the OpenStack modules
/usr/bin/python3 tests/real/setup.py "$work"
export OS_CLIENT_CONFIG_FILE="$work/clouds.yaml"
unset OS_CLOUD
# The cloud's state outlives a run: what a failed run left would count against quotas.
/usr/bin/python3 tests/real/verify.py cleanup demo
/usr/bin/python3 tests/real/verify.py cleanup kd
kubeadm_data() { /usr/bin/python3 tests/real/verify.py kubeadm kd > /dev/null 2>&1; }

echo "== the workload cluster: kubelets for the real servers, demo-workers-5's never starts"
rm -rf target/real-suite
$fd sim serve --listen 127.0.0.1:0 --kubernetes 127.0.0.1:0 --kubeconfig-dir target/real-suite \
  --kubelets-for fdstack --kubelets-cluster demo --kubelets-pod-cidr 10.244.0.0/16 \
  --never-register demo-workers-5 > "$work/kubelets.log" 2>&1 &
kubelets=$!
echo "== serve against the real cloud (no simulator)"
start_serve --no-sim
echo "== create: 3 control-plane + 2 workers"
$fd apply -f tests/real/cluster.yaml
wait_for 900 phase_is demo Ready || { cat "$work/kubelets.log"; fail "demo not Ready within 15 minutes"; }
$fd describe cluster demo
/usr/bin/python3 tests/real/verify.py exists demo 3 2 fake-img
/usr/bin/python3 tests/real/verify.py absent demo demo-workers-5
$fd events demo | grep -E "RemediationStarted.*demo-workers-5" || fail "no F3 repair of demo-workers-5"
/usr/bin/python3 tests/real/verify.py routes demo fd-router 10.244.0.0/16
echo "== a kubeadm cluster (no userData): its init machine's user data, read back from Nova"
$fd apply -f tests/real/cluster-kubeadm.yaml
wait_for 180 kubeadm_data || { /usr/bin/python3 tests/real/verify.py kubeadm kd || true; fail "kd-cp-1's user data is not kubeadm init within 3 minutes"; }
/usr/bin/python3 tests/real/verify.py kubeadm kd
$fd delete cluster kd --wait --timeout 10m
/usr/bin/python3 tests/real/verify.py gone kd
echo "== control-plane rollout to fake-img-2 and new user data (apply)"
$fd apply -f tests/real/cluster-v2.yaml
wait_for 1200 up_to_date demo fake-img-2 || fail "the rollout did not finish within 20 minutes"
/usr/bin/python3 tests/real/verify.py exists demo 3 2 fake-img-2 /etc/flightdeck-v2
wait_for 120 routes_match || fail "pod routes do not follow the new machines"
echo "== delete"
$fd delete cluster demo --wait --timeout 15m
/usr/bin/python3 tests/real/verify.py gone demo
stop_serve
echo "real OpenStack suite passed in $(( $(date +%s) - t0 ))s"
