#!/usr/bin/env bash
# Conformance (issue 41): kubeadm clusters that `flightdeck serve` builds on `flightdeck
# sim serve` (the OpenStack and the OpenNebula example), reached with kubectl (Debian's, 1.20) as its user would reach it:
# `flightdeck get kubeconfig`, then `kubectl get nodes` over TLS verified against the
# cluster's CA, through the simulator's proxy into the clusters' network (`sim serve
# --workload-proxy`, kubectl's HTTPS_PROXY; the daemon uses the same proxy with
# `serve --workload-proxy`).
#
# Checks:
# - `flightdeck up --openstack --workload-proxy` builds a kubeadm cluster to Ready, and
#   `flightdeck up --kubevirt --workload-proxy` a KubeVirt one (on the simulator's
#   infra cluster, its endpoint the Service's cluster IP, reached only through the proxy);
# - each cluster, applied with no userData, comes up through kubeadm init and join;
# - kubectl lists its five nodes Ready, with the kubeconfig flightdeck printed;
# - the same kubeconfig with another CA is refused at the handshake (kubectl verifies
#   the API server: the check can fail);
# - issuing the kubeconfig is an event that names who and until when, never its content;
# - deleting the clusters succeeds (`delete --wait`: flightdeck sees nothing left).
#
# KUBECTL=/path/to/kubectl runs it with another kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$(date +%s)

# shellcheck source=scripts/lib-kubectl.sh
. scripts/lib-kubectl.sh
# openssl makes the other CA of the refusal check.
bash scripts/need-package.sh openssl openssl
# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
sim=
up=
up_kv=
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2> /dev/null || true
  [ -n "$up" ] && kill "$up" 2> /dev/null || true
  [ -n "$up_kv" ] && kill "$up_kv" 2> /dev/null || true
  [ -n "$sim" ] && kill "$sim" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }

# Virtual time runs 10x the wall clock. flightdeck keeps the wall clock's time, so the
# simulator runs ahead of it by 9 s a second: a token flightdeck makes for 15 minutes is
# judged at the simulator's time, so every machine must be made within about 80 s of wall
# time of the simulator's start (they are within about 30: all three clusters are built
# at once).
speed=10
"$fd" sim serve --listen 127.0.0.1:0 --clouds-file "$work/clouds.yaml" \
  --kubernetes 127.0.0.1:0 --kubeconfig-dir "$work/kube" \
  --opennebula 127.0.0.1:0 --one-auth-file "$work/one_auth" \
  --one-xmlrpc-file "$work/one_xmlrpc" --workload-proxy 127.0.0.1:0 --workload-proxy-file "$work/proxy" \
  --speed "$speed" > "$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 1 100); do
  [ -s "$work/proxy" ] && break
  kill -0 "$sim" 2> /dev/null || break
  sleep 0.1
done
[ -s "$work/proxy" ] || { cat "$work/sim.log"; echo "FAIL: sim serve --workload-proxy did not start"; exit 1; }
proxy=$(cat "$work/proxy")
export OS_CLIENT_CONFIG_FILE=$work/clouds.yaml ONE_AUTH=$work/one_auth
ONE_XMLRPC=$(cat "$work/one_xmlrpc")
export ONE_XMLRPC

sed -e 's/cloud: sim$/cloud: flightdeck-sim/' -e '/router: demo-router/d' \
  -e '/Routes to each node/d' examples/openstack.yaml > "$work/demo.yaml"
# `flightdeck up --openstack` reaches a kubeadm cluster through the same proxy, beside the
# daemon: everything is built within the simulator's first minute or so (see above).
sed -e 's/name: demo$/name: solo/' -e 's/replicas: 3$/replicas: 1/' -e 's/replicas: 2$/replicas: 1/' \
  -e 's/securityGroup: demo-nodes/securityGroup: solo-nodes/' "$work/demo.yaml" > "$work/solo.yaml"
printf '  bootstrap:\n    provider: kubeadm\n' >> "$work/solo.yaml"
"$fd" up --openstack -f "$work/solo.yaml" --state-dir "$work/solo-state" --workload-proxy "$proxy" \
  --timeout 2m --quiet > "$work/up.log" 2>&1 &
up=$!
# And a KubeVirt cluster on the simulator's infra cluster: its machines' data names the
# endpoint Service's cluster IP, which only the proxy reaches from here.
wait_for 10 test -s "$work/kube/infra.kubeconfig" || fail "sim serve wrote no infra.kubeconfig"
python3 - examples/kubevirt.yaml "$work/kube/infra.kubeconfig" "$work/kv.yaml" << 'EOF'
import sys
text = open(sys.argv[1]).read()
text = text.replace("      # infraKubeconfig: /etc/flightdeck/infra.kubeconfig\n",
                    f"      infraKubeconfig: {sys.argv[2]}\n", 1)
text = text.replace("spec:\n  controlPlane:", "spec:\n  bootstrap:\n    provider: kubeadm\n  controlPlane:", 1)
assert "infraKubeconfig: /" in text and "provider: kubeadm" in text
open(sys.argv[3], "w").write(text)
EOF
"$fd" up --kubevirt -f "$work/kv.yaml" --state-dir "$work/kv-state" --workload-proxy "$proxy" \
  --timeout 2m --quiet > "$work/up-kv.log" 2>&1 &
up_kv=$!
start_serve --no-sim --workload-proxy "$proxy"
# The OpenNebula example names the simulator's own cloud by leaving xmlrpc out
# ($ONE_XMLRPC); its API endpoint is the address the example gives.
cp examples/opennebula.yaml "$work/nebula.yaml"
for f in demo nebula; do
  printf '  bootstrap:\n    provider: kubeadm\n' >> "$work/$f.yaml"
  ! grep -q userData "$work/$f.yaml" || fail "$f.yaml carries userData"
  "$fd" apply -f "$work/$f.yaml" | grep -q "cluster/$f created" || fail "apply $f"
done
wait "$up" || fail "up --openstack --workload-proxy: $(tail -20 "$work/up.log")"
up=
ok "flightdeck up --openstack --workload-proxy builds a kubeadm cluster to Ready ($(($(date +%s) - began))s)"
wait "$up_kv" || fail "up --kubevirt --workload-proxy: $(tail -20 "$work/up-kv.log")"
up_kv=
ok "flightdeck up --kubevirt --workload-proxy builds a kubeadm cluster to Ready at its Service's cluster IP ($(($(date +%s) - began))s)"
for f in demo nebula; do
  wait_for 120 phase_is "$f" Ready || fail "$f not Ready within 2 minutes: $("$fd" describe cluster "$f" 2>&1 | tail -20)"
  api "/api/v1/clusters/$f/events?limit=1000" > "$work/events.json"
  grep -q 'ControlPlaneInitialized' "$work/events.json" \
    || fail "$f: no event says the control plane was initialized: $(head -c 2000 "$work/events.json")"
  ok "$f, applied with no userData, is Ready through kubeadm init and join ($(($(date +%s) - began))s)"
done

for f in demo nebula; do
  "$fd" get kubeconfig "$f" --ttl 1h > "$work/kc-$f"
  [ -s "$work/kc-$f" ] || fail "get kubeconfig $f printed nothing"
  grep -q "certificate-authority-data" "$work/kc-$f" || fail "the kubeconfig of $f carries no CA"
  if grep -q "insecure-skip-tls-verify" "$work/kc-$f"; then fail "the kubeconfig of $f skips TLS verification"; fi
  HTTPS_PROXY=$proxy "$kubectl_bin" --kubeconfig "$work/kc-$f" --cache-dir "$work/cache" \
    get nodes -o json > "$work/nodes.json" 2> "$work/kubectl.err" \
    || fail "kubectl get nodes ($f): $(cat "$work/kubectl.err")"
  python3 - "$work/nodes.json" "$f" << 'EOF' || fail "kubectl get nodes does not list five Ready nodes of $f"
import json, sys
nodes = json.load(open(sys.argv[1]))["items"]
ready = [n["metadata"]["name"] for n in nodes
         if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
print("  nodes Ready:", " ".join(sorted(ready)))
sys.exit(0 if len(nodes) == 5 and len(ready) == 5 and all(r.startswith(sys.argv[2] + "-") for r in ready) else 1)
EOF
  # To a file first: `kubectl | grep -q` fails under pipefail when grep stops reading early.
  HTTPS_PROXY=$proxy "$kubectl_bin" --kubeconfig "$work/kc-$f" --cache-dir "$work/cache" get nodes \
    > "$work/nodes.txt" 2> "$work/kubectl.err" || fail "kubectl get nodes ($f): $(cat "$work/kubectl.err")"
  grep -q "^NAME" "$work/nodes.txt" || fail "kubectl get nodes ($f) prints no table: $(cat "$work/nodes.txt")"
  ok "kubectl, with the kubeconfig flightdeck printed for $f, lists its five nodes Ready over TLS"
done
cp "$work/kc-demo" "$work/kc"

# Another CA in the same kubeconfig: kubectl must refuse the API server.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=another-ca -keyout "$work/other.key" -out "$work/other.crt" 2> /dev/null
python3 - "$work/kc" "$work/other.crt" "$work/kc-other" << 'EOF'
import base64, re, sys
text = open(sys.argv[1]).read()
other = base64.b64encode(open(sys.argv[2], "rb").read()).decode()
out, n = re.subn(r"certificate-authority-data: \S+", f"certificate-authority-data: {other}", text)
assert n == 1, n
open(sys.argv[3], "w").write(out)
EOF
if HTTPS_PROXY=$proxy "$kubectl_bin" --kubeconfig "$work/kc-other" --cache-dir "$work/cache-other" \
  --request-timeout 20s get nodes > /dev/null 2> "$work/other.err"; then
  fail "kubectl trusted an API server another CA did not sign"
fi
grep -qi "x509\|certificate" "$work/other.err" || fail "the refusal is not about the certificate: $(cat "$work/other.err")"
ok "with another CA, kubectl refuses the API server ($(head -c 160 "$work/other.err" | tr '\n' ' '))"

api "/api/v1/clusters/demo/events?limit=1000" > "$work/events.json"
python3 - "$work/events.json" "$work/kc" << 'EOF' || fail "no KubeconfigIssued event, or it carries the kubeconfig"
import json, re, sys
raw = open(sys.argv[1]).read()
kc = open(sys.argv[2]).read()
for secret in re.findall(r"client-(?:certificate|key)-data: (\S+)", kc):
    assert secret[:40] not in raw, "a credential of the kubeconfig is in the events"
events = json.loads(raw)
items = events["items"] if isinstance(events, dict) else events
issued = [e for e in items if "Kubeconfig" in json.dumps(e)]
assert issued, "no event about the kubeconfig"
print("  event:", json.dumps(issued[-1])[:200])
EOF
ok "issuing the kubeconfig is an event, without its content"

"$fd" delete cluster demo --wait --timeout 5m > /dev/null || fail "delete demo --wait"
"$fd" delete cluster nebula --wait --timeout 5m > /dev/null || fail "delete nebula --wait"
ok "demo and nebula deleted"
stop_serve
echo "$pass passed, 0 failed ($(($(date +%s) - began))s)"
