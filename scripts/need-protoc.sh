# Sourced by scripts that build the etcd client: installs protoc (Debian's
# protobuf-compiler) when it is missing.
if ! command -v protoc >/dev/null; then
  echo "== installing protoc (Debian's protobuf-compiler)"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq protobuf-compiler >/dev/null
fi
