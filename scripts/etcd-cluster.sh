#!/usr/bin/env bash
# A real three-member etcd cluster (Debian's etcd-server) on loopback, for the tests of
# flightdeck's etcd store and its replicas. Installs etcd-server (and etcdctl) if needed.
#
#   scripts/etcd-cluster.sh start   # prints the store address: etcd://127.0.0.1:23790,...
#   scripts/etcd-cluster.sh stop
#   scripts/etcd-cluster.sh status
#   scripts/etcd-cluster.sh kill-member I   # SIGKILL member I (0-2); start-member I restarts it
#
# Members keep their data and logs under target/etcd/<name> (target/etcd-OFFSET/ with
# ETCD_PORT_OFFSET); `start` begins from empty
# data. Client ports 23790-23792, peer ports 23800-23802 (away from etcd's 2379/2380, so
# a developer's own etcd is left alone). --max-txn-ops is raised to 1024 (etcd's default
# is 128), as README "Running replicas on etcd" asks of a real deployment.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$PWD/target/etcd
names=(fd-etcd-0 fd-etcd-1 fd-etcd-2)
# ETCD_PORT_OFFSET moves every port (and the members' names), so that a second cluster
# can run beside the first (a developer's trials beside a CI run).
offset=${ETCD_PORT_OFFSET:-0}
if [ "$offset" != 0 ]; then
  names=(fd-etcd-$offset-0 fd-etcd-$offset-1 fd-etcd-$offset-2)
  dir=$PWD/target/etcd-$offset
fi
client_port() { echo $((23790 + offset + $1)); }
peer_port() { echo $((23800 + offset + $1)); }
address() {
  local a=""
  for i in 0 1 2; do a="$a${a:+,}127.0.0.1:$(client_port "$i")"; done
  echo "etcd://$a"
}

install() {
  command -v etcd >/dev/null && command -v etcdctl >/dev/null && return
  echo "== installing etcd (Debian's etcd-server and etcd-client)" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server etcd-client >&2
}

stop() {
  for n in "${names[@]}"; do
    if [ -f "$dir/$n.pid" ]; then
      kill "$(cat "$dir/$n.pid")" 2>/dev/null || true
      rm -f "$dir/$n.pid"
    fi
  done
  # Wait for the ports to be free again.
  for _ in $(seq 1 50); do
    pgrep -f "name ${names[0]%-0}-[0-9] " >/dev/null || return 0
    sleep 0.1
  done
  pkill -9 -f "name ${names[0]%-0}-[0-9] " || true
}

# member I: starts member I in the background, on its data directory as it is (empty
# at first; a restarted member rejoins with what it had).
member() {
  local i=$1 n=${names[$1]} cluster=""
  for j in 0 1 2; do
    cluster="$cluster${cluster:+,}${names[$j]}=http://127.0.0.1:$(peer_port "$j")"
  done
  ETCD_UNSUPPORTED_ARCH=${ETCD_UNSUPPORTED_ARCH:-} etcd --name "$n" \
    --data-dir "$dir/$n" \
    --listen-client-urls "http://127.0.0.1:$(client_port "$i")" \
    --advertise-client-urls "http://127.0.0.1:$(client_port "$i")" \
    --listen-peer-urls "http://127.0.0.1:$(peer_port "$i")" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(peer_port "$i")" \
    --initial-cluster "$cluster" \
    --initial-cluster-token flightdeck-test \
    --initial-cluster-state new \
    --max-txn-ops 1024 \
    --heartbeat-interval 100 --election-timeout 1000 \
    >> "$dir/$n.log" 2>&1 &
  echo $! > "$dir/$n.pid"
}

# kill_member I: SIGKILL, as a crash would.
kill_member() {
  local n=${names[$1]}
  [ -f "$dir/$n.pid" ] || return 0
  kill -9 "$(cat "$dir/$n.pid")" 2>/dev/null || true
  rm -f "$dir/$n.pid"
  for _ in $(seq 1 50); do
    pgrep -f "name $n " >/dev/null || return 0
    sleep 0.1
  done
}

start() {
  install
  stop
  rm -rf "$dir"
  mkdir -p "$dir"
  for i in 0 1 2; do member "$i"; done
  local endpoints
  endpoints=$(address | sed 's|etcd://||')
  for _ in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1; then
      address
      return 0
    fi
    sleep 0.2
  done
  echo "etcd did not become healthy within 20 s; its logs:" >&2
  tail -20 "$dir"/*.log >&2
  exit 1
}

status() {
  ETCDCTL_API=3 etcdctl --endpoints "$(address | sed 's|etcd://||')" endpoint status -w table
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  kill-member) kill_member "${2:?member 0, 1 or 2}" ;;
  start-member) member "${2:?member 0, 1 or 2}" ;;
  *) echo "usage: $0 start|stop|status|kill-member I|start-member I" >&2; exit 2 ;;
esac
