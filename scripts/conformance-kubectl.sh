#!/usr/bin/env bash
# Conformance: kubectl (Debian's kubernetes-client, 1.20) against `flightdeck sim serve
# --kubernetes`. Finds or installs kubectl, builds flightdeck, serves the simulator on
# loopback with a KubeVirt fixture (cluster `demo`: VMs demo-cp-1, demo-workers-2,
# demo-workers-3) and every PodDisruptionBudget blocked for the first PDB_BLOCK_WALL_S
# seconds, runs the suite, and stops the server on exit. The suite also builds the
# OpenStack example (as cluster `os`) with `flightdeck up --openstack` on the served
# simulator and drains one of its workers with kubectl.
#
# KUBECTL=/path/to/kubectl runs the suite with another kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$(date +%s)

# shellcheck source=scripts/lib-kubectl.sh
. scripts/lib-kubectl.sh
echo "kubectl: $kubectl_bin ($("$kubectl_bin" version --client --short 2> /dev/null || "$kubectl_bin" version --client | head -1))"

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
url_file="$work/kube_url"
# Virtual time runs 10x the wall clock: nodes register in seconds, and kubectl drain's
# 5-second retries are 50 virtual seconds apart.
speed=10
# Long enough for the suite to reach the drain while the PDBs still block, and for the
# drain to be refused at least once.
pdb_block_wall_s=${PDB_BLOCK_WALL_S:-25}
serve_started=$(date +%s.%N)
"$fd" sim serve --listen 127.0.0.1:0 --clouds-file "$work/clouds.yaml" \
  --kubernetes 127.0.0.1:0 --kubeconfig-dir "$work/kube" --kubernetes-url-file "$url_file" \
  --kubevirt-fixture --pdb-blocks-from 0 --pdb-blocks-for $((pdb_block_wall_s * speed)) \
  --speed "$speed" > "$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

# The URL file is the last one serve writes at start, once every listener is bound.
for _ in $(seq 1 100); do
  [ -s "$url_file" ] && break
  kill -0 "$server" 2> /dev/null || break
  sleep 0.1
done
[ -s "$url_file" ] || { cat "$work/serve.log"; echo "sim serve --kubernetes did not start"; exit 1; }
# The workload cluster's kubeconfig appears once its API server answers.
for _ in $(seq 1 600); do
  [ -s "$work/kube/demo.kubeconfig" ] && break
  kill -0 "$server" 2> /dev/null || break
  sleep 0.1
done
[ -s "$work/kube/demo.kubeconfig" ] || { cat "$work/serve.log"; echo "no kubeconfig for the workload cluster demo"; exit 1; }
for f in infra demo; do
  [ "$(stat -c %a "$work/kube/$f.kubeconfig")" = 600 ] || { echo "$f.kubeconfig is not mode 0600"; exit 1; }
done
# The clouds.yaml holds the simulator's password.
[ "$(stat -c %a "$work/clouds.yaml")" = 600 ] || { echo "clouds.yaml is not mode 0600"; exit 1; }
echo "simulated Kubernetes at $(cat "$url_file") (ready after $(($(date +%s) - began))s)"

status=0
FLIGHTDECK="$fd" KUBECTL="$kubectl_bin" INFRA_KUBECONFIG="$work/kube/infra.kubeconfig" \
  DEMO_KUBECONFIG="$work/kube/demo.kubeconfig" KUBECTL_CACHE_DIR="$work/kube-cache" \
  OS_CLIENT_CONFIG_FILE="$work/clouds.yaml" OPENSTACK_EXAMPLE=examples/openstack.yaml \
  SIM_SPEED="$speed" PDB_BLOCKS_UNTIL="$(awk -v s="$serve_started" -v b="$pdb_block_wall_s" 'BEGIN { printf "%.3f", s + b }')" \
  python3 tests/conformance/kubectl_conformance.py || status=$?
if [ "$status" != 0 ]; then
  echo "--- sim serve's log"
  tail -50 "$work/serve.log"
fi
echo "kubectl conformance took $(($(date +%s) - began))s"
exit "$status"
