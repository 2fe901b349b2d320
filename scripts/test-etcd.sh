#!/usr/bin/env bash
# flightdeck's store on a real three-member etcd cluster (Debian's etcd-server, started on
# loopback by scripts/etcd-cluster.sh): the same store suite the embedded store passes.
# Installs what it needs: etcd-server, and protoc (Debian's protobuf-compiler), which the
# etcd client needs to build.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/need-protoc.sh
. scripts/need-protoc.sh
# The client's code is linted by scripts/lint.sh.
trap 'bash scripts/etcd-cluster.sh stop' EXIT
address=$(bash scripts/etcd-cluster.sh start)
echo "== etcd cluster up: $address"
# In release, sharing the build of scripts/test-replicas.sh (flightdeck --features etcd).
FLIGHTDECK_TEST_ETCD=$address cargo test "${ETCD_BUILD[@]}" --test conformance --test replicas --lib
echo "== the etcd store passed"
