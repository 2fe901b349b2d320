# Sourced by scripts that build the etcd client: installs protoc (Debian's
# protobuf-compiler) when it is missing.
if ! command -v protoc >/dev/null; then
  echo "== installing protoc (Debian's protobuf-compiler)"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi

# One set of packages and features for every build with the etcd client, so that
# scripts/test-etcd.sh and scripts/test-replicas.sh share one build (cargo resolves
# features per invocation: two different selections would each rebuild most of the
# workspace). Tests are part of the selection, so dev-dependencies always count.
ETCD_BUILD=(--release -p flightdeck -p flightdeck-etcd --features flightdeck/etcd,flightdeck-etcd/client)
