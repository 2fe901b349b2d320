#!/usr/bin/env bash
# Replicas on etcd, end to end (issue 17's acceptance): three `flightdeck serve --store
# etcd://…` share 30 clusters on one simulated OpenStack served over HTTP, against a
# real three-member etcd on loopback; replicas and etcd members are killed, paused and
# cut off on purpose (scripts/replicas_trial.py says how, and what it checks).
#
#   TRIALS=10 scripts/test-replicas.sh     # trials of each kind (default 10); KILL_TRIALS,
#                                          # STOP_TRIALS, LEADER_TRIALS, QUORUM_TRIALS each alone
#
# Installs what it needs: etcd-server and etcd-client, and protoc (Debian's
# protobuf-compiler) to build flightdeck with --features etcd. The report of measured
# failover times is target/replicas/report.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/need-protoc.sh
. scripts/need-protoc.sh
cargo build "${ETCD_BUILD[@]}" --bin flightdeck --test replicas
work=$(mktemp -d)
# A copy: another build of target/release/flightdeck (without etcd) must not replace
# the binary under the running replicas.
cp target/release/flightdeck "$work/flightdeck"
# The scratch directory (logs, mutation log) is kept when the run fails.
trap 'bash scripts/etcd-cluster.sh stop; [ -n "${passed:-}" ] && rm -rf "$work"; [ -z "${passed:-}" ] && echo "kept: $work"' EXIT
address=$(bash scripts/etcd-cluster.sh start)
echo "== etcd cluster up: $address"
FD=$work/flightdeck WORK=$work ETCD_ADDRESS=$address ETCD_SCRIPT=scripts/etcd-cluster.sh \
  python3 scripts/replicas_trial.py
passed=1
