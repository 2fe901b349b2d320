# Sets `kubectl_bin`: $KUBECTL when set, else Debian's kubectl (kubernetes-client,
# 1.20), installed when missing. Source it from the repository's root.
# Debian's kubectl. When another package owns /usr/bin/kubectl (the Google Cloud SDK's
# does), Debian's cannot be installed beside it: its binary is unpacked under target/.
kubectl_bin=${KUBECTL:-}
if [ -z "$kubectl_bin" ]; then
  if ! command -v kubectl > /dev/null; then
    apt-get update && apt-get install -y kubernetes-client
  fi
  if dpkg-query -W -f='${Status}' kubernetes-client 2> /dev/null | grep -q 'install ok installed'; then
    kubectl_bin=/usr/bin/kubectl
  else
    unpacked=target/conformance-kubectl
    # One unpacking at a time: CI runs two kubectl suites side by side.
    mkdir -p target
    exec 9> target/conformance-kubectl.lock
    flock 9
    if [ ! -x "$unpacked/usr/bin/kubectl" ]; then
      rm -rf "$unpacked"
      mkdir -p "$unpacked"
      if ! (cd "$unpacked" && apt-get download kubernetes-client); then
        apt-get update
        (cd "$unpacked" && apt-get download kubernetes-client)
      fi
      dpkg-deb -x "$unpacked"/kubernetes-client_*.deb "$unpacked"
    fi
    flock -u 9
    exec 9>&-
    kubectl_bin=$PWD/$unpacked/usr/bin/kubectl
  fi
fi
