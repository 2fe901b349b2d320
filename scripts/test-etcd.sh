#!/usr/bin/env bash
# flightdeck's store on a real three-member etcd cluster (Debian's etcd-server, started on
# loopback by scripts/etcd-cluster.sh): the same store suite the embedded store passes.
# Installs what it needs: etcd-server, and protoc (Debian's protobuf-compiler), which the
# etcd client needs to build.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null; then
  echo "== installing protoc (Debian's protobuf-compiler)"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi
# The client's code is linted here, where protoc is at hand (CI's clippy run has none).
cargo clippy -p flightdeck-etcd --features client --all-targets -- -D warnings
trap 'bash scripts/etcd-cluster.sh stop' EXIT
address=$(bash scripts/etcd-cluster.sh start)
echo "== etcd cluster up: $address"
FLIGHTDECK_TEST_ETCD=$address cargo test -p flightdeck-etcd --features client
echo "== the etcd store passed"
