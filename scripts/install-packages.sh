#!/usr/bin/env bash
# Installs, in one apt run, every Debian package the test scripts need: protoc and etcd
# (scripts/test-etcd.sh, scripts/test-replicas.sh), promtool (scripts/test-daemon.sh, and
# the daemon's metrics test through scripts/need-package.sh), chromium and its driver
# (scripts/test-web.sh), kubectl (scripts/conformance-kubectl.sh), cloud-init
# (scripts/check-cloud-init-schema.sh).
# Each script still installs what it finds missing, so running this first is only
# quicker: CI runs it in the background while the workspace compiles.
set -euo pipefail

packages=()
command -v protoc >/dev/null || packages+=(protobuf-compiler)
command -v etcd >/dev/null || packages+=(etcd-server)
command -v etcdctl >/dev/null || packages+=(etcd-client)
command -v promtool >/dev/null || packages+=(prometheus)
command -v chromium >/dev/null || packages+=(chromium)
command -v chromedriver >/dev/null || packages+=(chromium-driver)
command -v kubectl >/dev/null || packages+=(kubernetes-client)
command -v cloud-init >/dev/null || packages+=(cloud-init)
command -v openssl >/dev/null || packages+=(openssl)
if [ ${#packages[@]} = 0 ]; then
  echo "== every package the tests need is installed"
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
echo "== installing ${packages[*]} (Debian)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${packages[@]}" >/dev/null
echo "== installed ${packages[*]}"
