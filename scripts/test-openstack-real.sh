#!/usr/bin/env bash
# The real-OpenStack suite: flightdeck's REST provider against Debian's OpenStack Zed
# services on loopback (../shared/openstack/up.sh). Builds a cluster (3 control-plane + 2
# workers), rolls its control plane, deletes it, and checks each step with openstacksdk.
# Nova's fake driver boots no kubelet, so nodes come from simulated kubelets keyed by the
# real servers (--simulated-nodes). Services are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=$(cd ../shared/openstack && pwd)
export FDSTACK_DIR=${FDSTACK_DIR:-/tmp/fdstack}
t0=$(date +%s)
# Build first: adminrc sets its own PATH.
cargo build --release -p flightdeck
fd=$(pwd)/target/release/flightdeck
work=$(mktemp -d)
trap 'bash "$shared/down.sh" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash "$shared/up.sh"
# shellcheck disable=SC1091
. "$FDSTACK_DIR/adminrc"
export PATH="/usr/bin:$PATH"  # Debian's python has the OpenStack modules
/usr/bin/python3 tests/real/setup.py "$work"
export OS_CLIENT_CONFIG_FILE="$work/clouds.yaml"
unset OS_CLOUD
state="$work/state"

echo "== create: 3 control-plane + 2 workers"
$fd up -f tests/real/cluster.yaml --openstack --simulated-nodes --state-dir "$state" --timeout 15m
/usr/bin/python3 tests/real/verify.py exists demo 3 2 fake-img
echo "== control-plane rollout to fake-img-2"
$fd up -f tests/real/cluster-v2.yaml --openstack --simulated-nodes --state-dir "$state" --timeout 20m
/usr/bin/python3 tests/real/verify.py exists demo 3 2 fake-img-2
echo "== delete"
$fd delete demo --cloud fdstack --simulated-nodes --state-dir "$state" --timeout 15m
/usr/bin/python3 tests/real/verify.py gone demo
echo "real OpenStack suite passed in $(( $(date +%s) - t0 ))s"
