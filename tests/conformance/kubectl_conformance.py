"""Conformance: kubectl (Debian's kubernetes-client, 1.20) against
`flightdeck sim serve --kubernetes --kubevirt-fixture`.

Where kubectl and our simulator disagree, the simulator is wrong. The script prints one
line per check ("ok   NAME" or "FAIL NAME" and why) and a closing "N passed, M failed"
line, and exits non-zero on any failure. It runs the kubectl in KUBECTL against the
kubeconfigs INFRA_KUBECONFIG (KubeVirt's infra cluster) and DEMO_KUBECONFIG (the
fixture's workload cluster `demo`), with its discovery cache in KUBECTL_CACHE_DIR. The
server runs in real time (SIM_SPEED virtual seconds per second); every PodDisruptionBudget
blocks until PDB_BLOCKS_UNTIL (Unix seconds, wall clock), and the drain must outlast that.

Checks run in order and later ones build on earlier ones (the drain needs Ready nodes):
after the first failure the rest still run, so that one run shows every disagreement.
"""

import json
import os
import subprocess
import sys
import time
import traceback

KUBECTL = os.environ["KUBECTL"]
INFRA = os.environ["INFRA_KUBECONFIG"]
DEMO = os.environ["DEMO_KUBECONFIG"]
CACHE_DIR = os.environ["KUBECTL_CACHE_DIR"]
SPEED = float(os.environ.get("SIM_SPEED", "1"))
PDB_BLOCKS_UNTIL = float(os.environ["PDB_BLOCKS_UNTIL"])

FIXTURE_NODES = ["demo-cp-1", "demo-workers-2", "demo-workers-3"]
WORKERS = ["demo-workers-2", "demo-workers-3"]
# The worker the drain empties: the one the `web` pods run on (the simulated scheduler
# binds them where a Ready worker is when they are created), demo-workers-2 on a tie.
# Set once the pods run (test_demo_pods_web_and_daemonset_pods_run).
DRAINED = "demo-workers-2"
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
# One kubectl call may take this long (wall clock) before it counts as hung.
CALL_TIMEOUT_S = 60


def kubectl(kubeconfig, *args, timeout=CALL_TIMEOUT_S, check=True):
    """Runs kubectl; returns (exit code, stdout, stderr). With `check`, a non-zero exit
    raises with kubectl's own words."""
    cmd = [KUBECTL, "--kubeconfig", kubeconfig, "--cache-dir", CACHE_DIR, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(
            f"`kubectl {' '.join(args)}` exited {p.returncode}:\n{p.stderr.strip()}")
    return p.returncode, p.stdout, p.stderr


def get_json(kubeconfig, *args):
    _, out, _ = kubectl(kubeconfig, "get", *args, "-o", "json")
    return json.loads(out)


def eq(actual, expected, what):
    assert actual == expected, f"{what}: expected {expected!r}, got {actual!r}"


def wait(predicate, what, virtual_seconds=600.0, interval=0.5):
    """Polls until `predicate()` is truthy; the deadline is `virtual_seconds` of the
    simulator's time, at least 20 s of wall time. A predicate that raises is retried
    (the cluster may not answer yet); its last error is reported."""
    deadline = time.monotonic() + max(20.0, virtual_seconds / SPEED)
    last = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
            last = None
        except (AssertionError, subprocess.TimeoutExpired, ValueError) as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}" + (f": {last}" if last else ""))


def ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions", []))


def table(text):
    """kubectl's human output as (header columns, rows of columns)."""
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines, "no output"
    return lines[0].split(), [l.split() for l in lines[1:]]


def pods_on(node):
    pods = get_json(DEMO, "pods", "-A", "--field-selector", f"spec.nodeName={node}")
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


def owner_kind(pod):
    for o in pod["metadata"].get("ownerReferences", []):
        if o.get("controller"):
            return o.get("kind")
    return None


# ---------------------------------------------------------------- the infra cluster


def test_infra_get_nodes_lists_ready_nodes():
    nodes = get_json(INFRA, "nodes")
    eq(nodes.get("kind"), "List", "kind of `get -o json`")
    assert nodes["items"], "the infra cluster has no nodes"
    for n in nodes["items"]:
        eq(n.get("kind"), "Node", "item kind")
        assert ready(n), f"infra node {n['metadata']['name']} is not Ready"
    _, out, _ = kubectl(INFRA, "get", "nodes")
    header, rows = table(out)
    eq(header[0], "NAME", "first column of `kubectl get nodes`")
    eq(sorted(r[0] for r in rows), sorted(n["metadata"]["name"] for n in nodes["items"]),
       "names in `kubectl get nodes`")


def test_infra_get_vm_and_vmi_through_discovery():
    def running():
        vmis = get_json(INFRA, "vmi")["items"]
        by_name = {v["metadata"]["name"]: v for v in vmis}
        return by_name if all(
            by_name.get(n, {}).get("status", {}).get("phase") == "Running"
            for n in FIXTURE_NODES) else None
    vmis = wait(running, "the fixture's VMIs Running", virtual_seconds=300)
    nodes = {n["metadata"]["name"] for n in get_json(INFRA, "nodes")["items"]}
    for name in FIXTURE_NODES:
        v = vmis[name]
        eq(v.get("apiVersion"), "kubevirt.io/v1", f"{name} apiVersion")
        eq(v.get("kind"), "VirtualMachineInstance", f"{name} kind")
        assert v["status"].get("nodeName") in nodes, \
            f"{name} status.nodeName {v['status'].get('nodeName')!r} is not an infra node"
        eq(v["spec"].get("evictionStrategy"), "External", f"{name} spec.evictionStrategy")
    # The short name and the human table, as kubectl's discovery resolves them.
    _, out, _ = kubectl(INFRA, "get", "vmi")
    header, rows = table(out)
    eq(header[0], "NAME", "first column of `kubectl get vmi`")
    for name in FIXTURE_NODES:
        assert any(r[0] == name for r in rows), f"{name} missing from `kubectl get vmi`"
    vms = {v["metadata"]["name"]: v for v in get_json(INFRA, "vm")["items"]}
    for name in FIXTURE_NODES:
        assert name in vms, f"VirtualMachine {name} missing"
        eq(vms[name]["kind"], "VirtualMachine", f"{name} kind")
        eq(vms[name]["spec"].get("runStrategy"), "Always", f"{name} spec.runStrategy")
        eq(vms[name]["metadata"]["labels"].get("flightdeck.dev/cluster"), "demo",
           f"{name} label flightdeck.dev/cluster")
    _, out, _ = kubectl(INFRA, "get", "virtualmachines.kubevirt.io", "-o",
                        "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}")
    eq(sorted(out.split()), sorted(vms), "VM names through the full resource name")


def test_infra_get_pods_all_namespaces():
    pods = get_json(INFRA, "pods", "-A")
    for p in pods["items"]:
        assert p["metadata"].get("namespace"), f"pod {p['metadata']['name']} has no namespace"
    launchers = [p for p in pods["items"]
                 if p["metadata"]["name"].startswith("virt-launcher-")]
    _, out, _ = kubectl(INFRA, "get", "pods", "-A")
    header, rows = table(out) if out.strip() else (["NAMESPACE", "NAME"], [])
    if pods["items"]:
        eq(header[:2], ["NAMESPACE", "NAME"], "first columns of `kubectl get pods -A`")
    eq(sorted((r[0], r[1]) for r in rows),
       sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods["items"]),
       "namespaces and names in `kubectl get pods -A`")
    return launchers


# ---------------------------------------------------------------- the workload cluster


def test_demo_nodes_register_and_become_ready():
    def all_ready():
        nodes = {n["metadata"]["name"]: n for n in get_json(DEMO, "nodes")["items"]}
        return nodes if all(n in nodes and ready(nodes[n]) for n in FIXTURE_NODES) else None
    nodes = wait(all_ready, "the demo cluster's nodes Ready", virtual_seconds=600)
    eq(sorted(nodes), sorted(FIXTURE_NODES), "demo's node names")
    _, out, _ = kubectl(DEMO, "get", "nodes")
    header, rows = table(out)
    eq(header[0], "NAME", "first column of `kubectl get nodes`")
    eq(sorted(r[0] for r in rows), sorted(FIXTURE_NODES), "names in `kubectl get nodes`")
    _, out, _ = kubectl(DEMO, "get", "node", "demo-cp-1", "-o",
                        "jsonpath={.metadata.name} {.spec.unschedulable}")
    eq(out.strip(), "demo-cp-1", "jsonpath of one node (not cordoned)")


def test_demo_pods_web_and_daemonset_pods_run():
    def running():
        pods = get_json(DEMO, "pods", "-A")["items"]
        web = [p for p in pods if p["metadata"].get("labels", {}).get("app") == "web"
               and p["status"].get("phase") == "Running"]
        proxies = {p["spec"].get("nodeName") for p in pods
                   if p["metadata"]["name"].startswith("kube-proxy")
                   and p["status"].get("phase") == "Running"}
        return pods if web and set(FIXTURE_NODES) <= proxies else None
    pods = wait(running, "web pods and a kube-proxy per node Running", virtual_seconds=600)
    global DRAINED
    web_nodes = [p["spec"].get("nodeName") for p in pods
                 if p["metadata"].get("labels", {}).get("app") == "web"]
    DRAINED = max(WORKERS, key=lambda n: (web_nodes.count(n), n == "demo-workers-2"))
    print(f"     web runs on {sorted(web_nodes)}: draining {DRAINED}")
    for p in pods:
        if p["metadata"]["name"].startswith("kube-proxy"):
            eq(p["metadata"]["namespace"], "kube-system", "kube-proxy's namespace")
            eq(owner_kind(p), "DaemonSet", f"{p['metadata']['name']}'s controller")
        if p["metadata"].get("labels", {}).get("app") == "web":
            eq(owner_kind(p), "ReplicaSet", f"{p['metadata']['name']}'s controller")
    _, out, _ = kubectl(DEMO, "get", "pods", "-A")
    header, rows = table(out)
    eq(header[:2], ["NAMESPACE", "NAME"], "first columns of `kubectl get pods -A`")
    eq(sorted((r[0], r[1]) for r in rows),
       sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in
              get_json(DEMO, "pods", "-A")["items"]),
       "namespaces and names in `kubectl get pods -A`")
    # The field selector kubectl drain lists a node's pods with.
    on = pods_on(DRAINED)
    assert all(p["spec"]["nodeName"] == DRAINED for p in on), \
        "--field-selector spec.nodeName= answered pods of other nodes"
    assert any(owner_kind(p) == "DaemonSet" for p in on), f"no DaemonSet pod on {DRAINED}"


def unschedulable(node):
    _, out, _ = kubectl(DEMO, "get", "node", node, "-o", "jsonpath={.spec.unschedulable}")
    return out.strip()


def test_cordon_then_uncordon():
    _, out, _ = kubectl(DEMO, "cordon", DRAINED)
    assert f"node/{DRAINED} cordoned" in out, out
    eq(unschedulable(DRAINED), "true", "spec.unschedulable after cordon")
    _, out, _ = kubectl(DEMO, "uncordon", DRAINED)
    assert f"node/{DRAINED} uncordoned" in out, out
    # kubectl uncordons with the strategic merge patch {"spec":{"unschedulable":null}}:
    # the field is gone (false is its zero value).
    assert unschedulable(DRAINED) in ("", "false"), \
        f"spec.unschedulable after uncordon: {unschedulable(DRAINED)!r}"


def test_a_watch_sees_a_cordon():
    """`kubectl get node -w` (a streamed watch) prints the node again when it changes."""
    cmd = [KUBECTL, "--kubeconfig", DEMO, "--cache-dir", CACHE_DIR, "get", "node", DRAINED,
           "--watch", "-o", "jsonpath={.metadata.name}={.spec.unschedulable}{'\\n'}"]
    watcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = watcher.stdout.readline().strip()
        eq(first, f"{DRAINED}=", "the watch's first line (the node as listed)")
        kubectl(DEMO, "cordon", DRAINED)
        seen = []
        while len(seen) < 5 and f"{DRAINED}=true" not in seen:
            seen.append(watcher.stdout.readline().strip())
        eq(seen[-1], f"{DRAINED}=true", f"the watch's last line after cordon (of {seen})")
    finally:
        watcher.kill()
        watcher.wait()
        kubectl(DEMO, "uncordon", DRAINED)


def disruptions_allowed():
    _, out, _ = kubectl(DEMO, "get", "pdb", "web", "-o",
                        "jsonpath={.status.disruptionsAllowed}")
    return out.strip()


def test_pdb_web_blocks_while_the_fault_is_active():
    assert time.time() < PDB_BLOCKS_UNTIL - 6, (
        "the PDB block ends before the drain could see it: raise PDB_BLOCK_WALL_S "
        f"(it ends in {PDB_BLOCKS_UNTIL - time.time():.1f}s)")
    eq(disruptions_allowed(), "0", "pdb web status.disruptionsAllowed while blocked")
    pdb = get_json(DEMO, "pdb", "web")
    assert pdb["apiVersion"].startswith("policy/"), pdb["apiVersion"]
    eq(pdb["kind"], "PodDisruptionBudget", "kind")
    assert pdb["spec"].get("minAvailable") is not None \
        or pdb["spec"].get("maxUnavailable") is not None, "pdb web has no budget"


def test_drain_retries_while_the_pdb_blocks_then_completes():
    web_before = [p["metadata"]["name"] for p in pods_on(DRAINED)
                  if p["metadata"].get("labels", {}).get("app") == "web"]
    assert web_before, f"no web pod on {DRAINED} to evict (fixture placement changed?)"
    budget_s = max(60, int(PDB_BLOCKS_UNTIL - time.time()) + 90)
    started = time.time()
    code, out, err = kubectl(
        DEMO, "drain", DRAINED, "--ignore-daemonsets", "--delete-emptydir-data",
        f"--timeout={budget_s}s", timeout=budget_s + 30, check=False)
    took = time.time() - started
    transcript = f"--- stdout\n{out}--- stderr\n{err}"
    eq(code, 0, f"kubectl drain's exit code ({took:.0f}s)\n{transcript}")
    assert PDB_MESSAGE in err, f"kubectl never printed {PDB_MESSAGE!r}\n{transcript}"
    assert "will retry after 5s" in err, f"kubectl did not retry the eviction\n{transcript}"
    assert time.time() >= PDB_BLOCKS_UNTIL - 1, \
        f"the drain finished while the PDB still blocked\n{transcript}"
    assert f"node/{DRAINED} drained" in out or f"node/{DRAINED} evicted" in out, transcript
    for name in web_before:
        assert f"pod/{name} evicted" in out, f"pod/{name} evicted not printed\n{transcript}"
    eq(unschedulable(DRAINED), "true", "spec.unschedulable after drain")
    left = pods_on(DRAINED)
    web_left = [p["metadata"]["name"] for p in left
                if p["metadata"].get("labels", {}).get("app") == "web"]
    eq(web_left, [], f"web pods left on {DRAINED}")
    assert any(p["metadata"]["name"].startswith("kube-proxy") for p in left), \
        f"the DaemonSet pod kube-proxy left {DRAINED}: {[p['metadata']['name'] for p in left]}"


def test_web_is_replaced_on_another_node():
    def replaced():
        pods = get_json(DEMO, "pods", "-l", "app=web")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        on_drained = [p for p in live if p["spec"].get("nodeName") == DRAINED]
        running = [p for p in live if p["status"].get("phase") == "Running"]
        return live if not on_drained and len(running) == len(live) else None
    live = wait(replaced, "web's pods Running, none on the drained node", virtual_seconds=300)
    for p in live:
        assert p["spec"]["nodeName"] in FIXTURE_NODES and p["spec"]["nodeName"] != DRAINED, \
            f"{p['metadata']['name']} on {p['spec'].get('nodeName')}"
    allowed = disruptions_allowed()
    assert allowed.isdigit(), f"pdb web status.disruptionsAllowed {allowed!r}"


def test_eviction_of_a_missing_pod_answers_404():
    """What kubectl drain treats as 'already gone' (it skips a 404)."""
    code, _, err = kubectl(DEMO, "get", "pod", "no-such-pod", check=False)
    assert code != 0
    assert 'pods "no-such-pod" not found' in err, err


# The cluster `flightdeck up --kubevirt` builds for the userData checks, after the
# fixture's checks: its control plane's user data fits inline, its worker's does not.
UD_CLUSTER = "ud"
UD_SMALL = "#cloud-config\nhostname: {{ machine }}\nwrite_files:\n- {path: /etc/flightdeck/cluster, content: '{{ cluster }} {{ role }}'}\n"
UD_LARGE = UD_SMALL + "".join(f"# padding line {i:04d} to pass KubeVirt's 2,048-byte inline limit\n" for i in range(60))
UP = {}


def ud_vms():
    vms = get_json(INFRA, "vm", "-A", "-l", f"flightdeck.dev/cluster={UD_CLUSTER}")["items"]
    by_role = {}
    for vm in vms:
        machine = vm["metadata"]["labels"].get("flightdeck.dev/machine", "")
        by_role["cp" if machine.startswith("cp-") else "worker"] = vm
    return by_role


def cloud_init_volume(vm):
    for v in vm["spec"]["template"]["spec"].get("volumes", []):
        if "cloudInitNoCloud" in v:
            return v["cloudInitNoCloud"]
    raise AssertionError(f"no cloudInitNoCloud volume on {vm['metadata']['name']}")


def test_flightdeck_up_makes_vms_with_user_data():
    """flightdeck itself makes the VMs the next checks read back."""
    work = os.path.dirname(INFRA)
    for name, text in (("small.yaml", UD_SMALL), ("large.yaml", UD_LARGE)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    spec = f"""apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata: {{name: {UD_CLUSTER}}}
spec:
  bootstrap: {{provider: none}}
  controlPlane:
    replicas: 1
    version: v1.30.2
    machine: {{flavor: u1.medium, image: quay.io/containerdisks/ubuntu:22.04, userData: small.yaml}}
  nodePools:
  - name: workers
    replicas: 1
    machine: {{flavor: u1.medium, image: quay.io/containerdisks/ubuntu:22.04, userData: large.yaml}}
  network: {{podCIDR: 10.244.0.0/16}}
  provider:
    kubevirt:
      namespace: default
      infraKubeconfig: {INFRA}
      workloadKubeconfig: {{file: {os.path.join(work, UD_CLUSTER + ".kubeconfig")}}}
"""
    path = os.path.join(work, "ud.yaml")
    with open(path, "w") as f:
        f.write(spec)
    log = open(os.path.join(work, "up-ud.log"), "w")
    UP["proc"] = subprocess.Popen(
        [os.environ["FLIGHTDECK"], "up", "--kubevirt", "-f", path, "--state-dir",
         os.path.join(work, "ud-state"), "--timeout", "10m", "--quiet"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    wait(lambda: {"cp", "worker"} <= set(ud_vms()), "flightdeck's two VMs", virtual_seconds=600)


def test_small_user_data_is_inline_in_the_vm():
    vm = ud_vms()["cp"]
    src = cloud_init_volume(vm)
    import base64
    text = base64.b64decode(src["userDataBase64"]).decode()
    name = vm["metadata"]["name"]
    assert f"hostname: {name}\n" in text, text
    assert f"content: '{UD_CLUSTER} control-plane'" in text, text
    assert "{{" not in text, "every variable is filled in: " + text


def test_large_user_data_comes_from_a_secret_the_vm_owns():
    vm = ud_vms()["worker"]
    src = cloud_init_volume(vm)
    assert "userDataBase64" not in src, src
    secret_name = src["secretRef"]["name"]
    ns = vm["metadata"]["namespace"]
    secret = get_json(INFRA, "secret", secret_name, "-n", ns)
    import base64
    text = base64.b64decode(secret["data"]["userdata"]).decode()
    assert len(text) > 2048, len(text)
    assert f"hostname: {vm['metadata']['name']}\n" in text, text[:200]
    assert f"content: '{UD_CLUSTER} worker'" in text, text[:300]
    owners = secret["metadata"]["ownerReferences"]
    eq([(o["kind"], o["name"], o["uid"]) for o in owners],
       [("VirtualMachine", vm["metadata"]["name"], vm["metadata"]["uid"])], "the Secret's owner")


# The OpenStack cluster `flightdeck up --openstack` builds on the served simulator (the
# repository's example, renamed): its workload cluster runs the simulated workload (web
# under a PodDisruptionBudget, a cache pod with emptyDir data, a DaemonSet, static pods),
# and kubectl drains one of its workers as it would a real cluster's.
OS_CLUSTER = "os"
OS_WORKERS = ["os-workers-4", "os-workers-5"]


def os_kubeconfig():
    return os.path.join(os.path.dirname(INFRA), OS_CLUSTER + ".kubeconfig")


def test_flightdeck_up_builds_an_openstack_cluster_whose_nodes_kubectl_lists():
    work = os.path.dirname(INFRA)
    with open(os.environ["OPENSTACK_EXAMPLE"]) as f:
        example = f.read()
    spec = (example.replace("name: demo\n", f"name: {OS_CLUSTER}\n", 1)
            .replace("cloud: sim\n", "cloud: flightdeck-sim\n")
            .replace("      router: demo-router\n", ""))
    # Its own bootstrap (none): the simulator's kubelets make the cluster, and it is read
    # through the kubeconfig sim serve writes (kubeadm clusters: conformance-kubeadm.sh).
    spec += "  bootstrap: {provider: none}\n"
    spec += f"  workload:\n    kubeconfig: {os_kubeconfig()}\n"
    path = os.path.join(work, "os.yaml")
    with open(path, "w") as f:
        f.write(spec)
    with open(os.path.join(work, "up-os.log"), "w") as log:
        code = subprocess.run(
            [os.environ["FLIGHTDECK"], "up", "--openstack", "-f", path, "--state-dir",
             os.path.join(work, "os-state"), "--timeout", "30m", "--quiet"],
            stdout=log, stderr=subprocess.STDOUT, timeout=600,
        ).returncode
    with open(os.path.join(work, "up-os.log")) as log:
        eq(code, 0, f"flightdeck up --openstack's exit code\n{log.read()[-3000:]}")

    def all_ready():
        nodes = get_json(os_kubeconfig(), "nodes")["items"]
        return nodes if len(nodes) == 5 and all(ready(n) for n in nodes) else None
    nodes = wait(all_ready, "the OpenStack cluster's 5 nodes Ready", virtual_seconds=600)
    names = sorted(n["metadata"]["name"] for n in nodes)
    assert set(OS_WORKERS) <= set(names), names
    for n in nodes:
        provider = n["spec"].get("providerID", "")
        assert provider.startswith("openstack:///"), f"{n['metadata']['name']}: {provider!r}"
    _, out, _ = kubectl(os_kubeconfig(), "get", "nodes")
    # The simulator serves no server-side Table (kubectl then prints NAME and AGE only).
    header, rows = table(out)
    eq(header[0], "NAME", "first column of `kubectl get nodes`")
    eq(sorted(r[0] for r in rows), names, "names in `kubectl get nodes`")


def os_pods_on(node):
    return [p for p in get_json(os_kubeconfig(), "pods", "-A")["items"]
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")]


def test_the_openstack_workload_runs_under_its_budget():
    def running():
        pods = get_json(os_kubeconfig(), "pods", "-A")["items"]
        web = [p for p in pods if p["metadata"].get("labels", {}).get("app") == "web"]
        if len(web) < 2 or any(p["status"].get("phase") != "Running" for p in web):
            return None
        return pods
    pods = wait(running, "web's two pods Running", virtual_seconds=600)
    kinds = {owner_kind(p) for p in pods}
    assert "DaemonSet" in kinds, kinds
    assert any(any("emptyDir" in v for v in p["spec"].get("volumes", [])) for p in pods), \
        "no pod with emptyDir data"
    pdb = get_json(os_kubeconfig(), "pdb", "web")
    assert pdb["spec"].get("minAvailable") is not None, pdb["spec"]


def test_kubectl_drains_an_openstack_worker_and_its_pods_move():
    drained = max(OS_WORKERS, key=lambda n: sum(
        1 for p in os_pods_on(n) if owner_kind(p) not in ("DaemonSet", "Node")))
    leaving = [p["metadata"]["name"] for p in os_pods_on(drained)
               if owner_kind(p) not in ("DaemonSet", "Node")]
    assert leaving, f"no pod that must leave on {drained}"
    code, out, err = kubectl(
        os_kubeconfig(), "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data",
        "--timeout=300s", timeout=330, check=False)
    transcript = f"--- stdout\n{out}--- stderr\n{err}"
    eq(code, 0, f"kubectl drain's exit code\n{transcript}")
    for name in leaving:
        assert f"pod/{name} evicted" in out, f"pod/{name} evicted not printed\n{transcript}"
    _, flag, _ = kubectl(os_kubeconfig(), "get", "node", drained, "-o",
                         "jsonpath={.spec.unschedulable}")
    eq(flag, "true", "spec.unschedulable after drain")
    left = [p["metadata"]["name"] for p in os_pods_on(drained)
            if owner_kind(p) not in ("DaemonSet", "Node")]
    eq(left, [], f"pods that must leave still on {drained}")

    def moved():
        web = [p for p in get_json(os_kubeconfig(), "pods", "-l", "app=web")["items"]
               if not p["metadata"].get("deletionTimestamp")]
        ok = len(web) == 2 and all(p["status"].get("phase") == "Running"
                                   and p["spec"].get("nodeName") != drained for p in web)
        return web if ok else None
    wait(moved, f"web's pods Running again, none on {drained}", virtual_seconds=600)
    kubectl(os_kubeconfig(), "uncordon", drained)


def stop_up():
    proc = UP.pop("proc", None)
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    tests = [v for k, v in globals().items() if k.startswith("test_")]
    passed = failed = 0
    started = time.monotonic()
    for t in tests:
        t0 = time.monotonic()
        try:
            t()
        except Exception:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL {t.__name__} ({time.monotonic() - t0:.1f}s)")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {t.__name__} ({time.monotonic() - t0:.1f}s)")
        sys.stdout.flush()
    stop_up()
    print(f"{passed} passed, {failed} failed ({time.monotonic() - started:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
