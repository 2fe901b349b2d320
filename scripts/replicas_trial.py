#!/usr/bin/env python3
"""Replicas on etcd, end to end: three `flightdeck serve --store etcd://...` share 30
clusters on one simulated OpenStack (`flightdeck sim serve`), and are broken on purpose.

Every check reads ground truth: the claims in etcd (`etcdctl`), the events the replicas
committed to etcd, and the simulator's mutation log, which records the replica and the
claim revision behind every call (`X-Flightdeck-Caller`). Nothing is read from a
replica's memory except where a step says so.

Run by scripts/test-replicas.sh, which installs etcd and protoc, builds flightdeck with
`--features etcd` and starts a three-member etcd on loopback. Prints a report of the
measured times (median and worst of each kind of trial) and writes it to
target/replicas/report.md.
"""

import base64
import json
import os
import signal
import statistics
import shutil
import subprocess
import sys
import time
import urllib.request

FD = os.environ["FD"]
ADDRESS = os.environ["ETCD_ADDRESS"]  # etcd://127.0.0.1:23790,...
ENDPOINTS = ADDRESS.removeprefix("etcd://")
WORK = os.environ["WORK"]
ETCD_SCRIPT = os.environ["ETCD_SCRIPT"]
TRIALS = int(os.environ.get("TRIALS", "10"))
KILL_TRIALS = int(os.environ.get("KILL_TRIALS", str(TRIALS)))
STOP_TRIALS = int(os.environ.get("STOP_TRIALS", str(TRIALS)))
LEADER_TRIALS = int(os.environ.get("LEADER_TRIALS", str(TRIALS)))
QUORUM_TRIALS = int(os.environ.get("QUORUM_TRIALS", str(TRIALS)))
CLUSTERS = int(os.environ.get("CLUSTERS", "30"))
TTL = int(os.environ.get("LEASE_TTL", "6"))
PAUSE = int(os.environ.get("PAUSE_SECONDS", "40"))
PREFIX = "/flightdeck/"
REPLICAS = ["r0", "r1", "r2"]
MUTATIONS = f"{WORK}/mutations.jsonl"

procs = {}
report = []


def say(*a):
    print(*a, flush=True)


def fail(msg):
    say(f"FAIL: {msg}")
    for r in live():
        try:
            items = api(r, "/api/v1/clusters")["items"]
            say(f"--- {r} drives " + ", ".join(
                f"{d['name']}:{d['phase']}{'' if not d.get('lastError') else '!' + d['lastError'][:120]}"
                for d in items))
            if items:
                name = items[0]["name"]
                for e in api(r, f"/api/v1/clusters/{name}/events")["items"][-8:]:
                    say(f"    {name} {e['at']} {e['reason']}: {e['message'][:160]}")
        except Exception as e:  # the dump is best effort
            say(f"--- {r}: cannot read its API: {e}")
    for r in REPLICAS:
        log = f"{WORK}/{r}.log"
        if os.path.exists(log):
            say(f"--- {r}.log (last 15 lines)")
            with open(log) as f:
                say("".join(f.readlines()[-15:]))
    # etcd's side, kept with the replicas' logs (the next start of the etcd cluster
    # begins from empty data and logs).
    offset = os.environ.get("ETCD_PORT_OFFSET", "0")
    etcd_dir = os.path.join(os.path.dirname(os.path.abspath(ETCD_SCRIPT)), "..", "target",
                            "etcd" if offset == "0" else f"etcd-{offset}")
    for name in sorted(os.listdir(etcd_dir)) if os.path.isdir(etcd_dir) else []:
        if name.endswith(".log"):
            shutil.copy(os.path.join(etcd_dir, name), os.path.join(WORK, "etcd-" + name))
            with open(os.path.join(etcd_dir, name)) as f:
                say(f"--- etcd {name} (last 5 lines)\n" + "".join(f.readlines()[-5:]))
    try:
        say(etcdctl("endpoint", "status", "-w", "table"))
    except RuntimeError as e:
        say(f"--- etcd endpoint status: {e}")
    sys.exit(1)


def now_ms():
    return int(time.time() * 1000)


def etcdctl(*args):
    out = subprocess.run(
        ["etcdctl", "--endpoints", ENDPOINTS, "--command-timeout=3s", *args],
        capture_output=True, text=True, env=dict(os.environ, ETCDCTL_API="3"))
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout


def prefixed(prefix):
    """key (without `prefix`) -> (value, create_revision)"""
    d = json.loads(etcdctl("get", "--prefix", PREFIX + prefix, "-w", "json"))
    out = {}
    for kv in d.get("kvs", []):
        key = base64.b64decode(kv["key"]).decode()[len(PREFIX + prefix):]
        out[key] = (base64.b64decode(kv.get("value", "")).decode(), kv["create_revision"])
    return out


def claims():
    """cluster -> (replica, claim revision), from etcd"""
    return prefixed("claims/")


def claims_retrying():
    while True:
        try:
            return claims()
        except RuntimeError:
            time.sleep(0.2)


def events(cluster):
    return [json.loads(v) for v, _ in prefixed(f"e/{cluster}/").values()]


def mutations():
    if not os.path.exists(MUTATIONS):
        return []
    with open(MUTATIONS) as f:
        return [json.loads(line) for line in f if line.strip()]


def cluster_of(m):
    for t in m.get("target_tags", []):
        if t.startswith("flightdeck-cluster="):
            return t.split("=", 1)[1]
    return None


def caller_of(m):
    """(replica, claim revision) the mutation names, or (None, None)"""
    c = m.get("caller")
    if not c:
        return None, None
    parts = dict(p.split("=", 1) for p in c.split() if "=" in p)
    return parts.get("replica"), int(parts["claim"]) if "claim" in parts else None


def api(replica, path, body=None):
    state = f"{WORK}/{replica}"
    with open(f"{state}/api.url") as f:
        base = f.read().strip()
    with open(f"{state}/admin.token") as f:
        token = f.read().strip()
    req = urllib.request.Request(base + path, data=body, method="POST" if body else "GET")
    req.add_header("Authorization", f"Bearer {token}")
    if body:
        req.add_header("Content-Type", "application/yaml")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def start_replica(r):
    state = f"{WORK}/{r}"
    os.makedirs(state, exist_ok=True)
    url = f"{state}/api.url"
    if os.path.exists(url):
        os.remove(url)
    log = open(f"{WORK}/{r}.log", "a")
    with open(f"{WORK}/one_xmlrpc") as f:
        xmlrpc = f.read().strip()
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=f"{WORK}/clouds.yaml",
               ONE_AUTH=f"{WORK}/one_auth", ONE_XMLRPC=xmlrpc,
               FLIGHTDECK_LOG=os.environ.get("FLIGHTDECK_LOG", "info"))
    procs[r] = subprocess.Popen(
        [FD, "serve", "--state-dir", state, "--listen", "127.0.0.1:0", "--no-sim",
         "--store", ADDRESS, "--replica-name", r, "--lease-ttl", str(TTL),
         "--etcd-max-txn-ops", "1024",
         # One key for the clusters' sealed secrets, shared by every replica (the
         # first one to start makes it).
         "--secrets-key-file", f"{WORK}/secrets.key"],
        stdout=log, stderr=log, env=env)
    wait(30, lambda: os.path.exists(url) and os.path.getsize(url) > 0, f"{r} did not start")


def wait(secs, cond, what, every=0.1):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return time.time()
        time.sleep(every)
    fail(f"{what} (waited {secs} s)")


def spec(n, image):
    name = f"c{n:02d}"
    return f"""apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  controlPlane:
    replicas: 1
    version: v1.30.2
    machine: {{flavor: m1.large, image: ubuntu-2204-kube-v1.30.2}}
  nodePools:
    - name: workers
      replicas: 2
      machine: {{flavor: m1.xlarge, image: ubuntu-2204-kube-{image}}}
  network: {{podCIDR: 10.244.0.0/16, securityGroup: {name}-nodes}}
  apiLoadBalancer:
    port: 6443
    healthMonitor: {{type: TCP, delay: 5s, timeout: 3s, maxRetries: 3}}
  provider:
    openstack: {{cloud: flightdeck-sim, network: private, subnet: private-subnet}}
  workload: {{kubeconfig: {WORK}/kube/{name}.kubeconfig}}
  bootstrap: {{provider: none}}
"""


# Three images in turn: each apply differs from the two before it, so a trial that
# applies twice (before breaking something, and after) always hands every holder a spec
# it has not got (with two, the second apply could bring back what a holder still has,
# and it commits nothing for a spec it already drives).
IMAGES = ["v1.30.3", "v1.30.2", "v1.30.4"]


def apply_all(through, again=False):
    """Applies all clusters with the next workers' image (the same with `again`):
    every cluster has a rollout to do after each (two workers replaced one by one, each
    new one waited for until its node is ready)."""
    if not again:
        IMAGES.append(IMAGES.pop(0))
    docs = "---\n".join(spec(n, IMAGES[0]) for n in range(CLUSTERS))
    api(through, "/api/v1/clusters", docs.encode())


def all_ready():
    """Every cluster ready, as the replicas that drive them say (their nodes are the
    simulator's kubelets, read through each workload cluster's kubeconfig)."""
    items = [d for r in live() for d in api(r, "/api/v1/clusters")["items"]]
    return len(items) == CLUSTERS and all(d["ready"] for d in items)


def live():
    return [r for r in REPLICAS if r in procs and procs[r].poll() is None]


def share_ok():
    c = claims_retrying()
    if len(c) != CLUSTERS:
        return False
    per = {r: 0 for r in REPLICAS}
    for owner, _ in c.values():
        per[owner] = per.get(owner, 0) + 1
    return all(0 < per[r] <= CLUSTERS * 0.4 for r in live())


def check_share():
    c = claims()
    per = {}
    for owner, _ in c.values():
        per[owner] = per.get(owner, 0) + 1
    # What each replica's API says it drives must agree with etcd's claims.
    for r in live():
        driven = {d["name"] for d in api(r, "/api/v1/clusters")["items"]}
        mine = {k for k, (o, _) in c.items() if o == r}
        if driven != mine:
            fail(f"replica {r} drives {sorted(driven ^ mine)} against etcd's claims")
    say(f"ok: every one of {len(c)} clusters is claimed by exactly one replica; "
        f"shares {dict(sorted(per.items()))} (at most 40 % = {int(CLUSTERS * 0.4)})")


def duplicates():
    """Live servers sharing a name, replayed from the mutation log."""
    live_objs = {}
    for m in mutations():
        if not m["ok"] or m["service"] != "nova":
            continue
        if m["kind"] == "Create":
            live_objs[m["target_id"]] = m["target_name"]
        elif m["kind"] == "Delete":
            live_objs.pop(m["target_id"], None)
    names = list(live_objs.values())
    return sorted({n for n in names if names.count(n) > 1})


def taken_up_at(cluster, after_ms, by_not):
    for e in events(cluster):
        if e["reason"] == "ClusterTakenUp" and e["at"] >= after_ms and f"replica {by_not} " not in e["message"]:
            return e["at"]
    return None


def kill_trial(i):
    victim = REPLICAS[i % 3]
    before = {k: v for k, v in claims().items() if v[0] == victim}
    others = [r for r in live() if r != victim]
    apply_all(others[0])
    time.sleep(3)
    t0 = now_ms()
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    wait(60, lambda: all(claims_retrying().get(k, (victim,))[0] != victim for k in before),
         f"trial {i}: the clusters of killed {victim} were not claimed by others")
    t_claimed = now_ms()
    wait(30, lambda: all(taken_up_at(k, t0, victim) for k in before),
         f"trial {i}: the clusters of killed {victim} were not taken up")
    takeover = max(taken_up_at(k, t0, victim) for k in before) - t0
    # Progress: a mutation by the new holder, for the clusters that had work left.
    firsts = []
    time.sleep(2)
    for m in mutations():
        r, _ = caller_of(m)
        c = cluster_of(m)
        if m["logged_ms"] >= t0 and c in before and r and r != victim and m["ok"]:
            firsts.append((c, m["logged_ms"] - t0))
    first_by = {}
    for c, dt in firsts:
        first_by.setdefault(c, dt)
    start_replica(victim)
    wait(60, share_ok, f"trial {i}: the shares did not even out after {victim} came back")
    say(f"trial {i}: kill -9 {victim} ({len(before)} clusters): claimed by others in "
        f"{(t_claimed - t0) / 1000:.1f} s, all taken up in {takeover / 1000:.1f} s; "
        f"{len(first_by)} of them mutated by their new holder, the last after "
        f"{max(first_by.values(), default=0) / 1000:.1f} s")
    return takeover, max(first_by.values(), default=None)


def stop_trial(i):
    victim = REPLICAS[i % 3]
    before = {k: v for k, v in claims().items() if v[0] == victim}
    old = {(victim, rev) for _, (_, rev) in before.items()}
    apply_all([r for r in live() if r != victim][0])
    time.sleep(2)
    t0 = now_ms()
    procs[victim].send_signal(signal.SIGSTOP)
    wait(PAUSE + 20, lambda: all(claims_retrying().get(k, (victim,))[0] != victim for k in before),
         f"stop trial {i}: the clusters of stopped {victim} were not claimed by others")
    moved = now_ms()
    time.sleep(max(0, PAUSE - (time.time() - t0 / 1000)))
    procs[victim].send_signal(signal.SIGCONT)
    t_cont = now_ms()
    wait(60, share_ok, f"stop trial {i}: the shares did not even out after {victim} resumed")
    time.sleep(3)
    late = [m for m in mutations()
            if m["logged_ms"] >= moved and caller_of(m) in old]
    if late:
        fail(f"stop trial {i}: {victim} mutated {len(late)} time(s) under claims that had moved: {late[:3]}")
    say(f"trial {i}: SIGSTOP {victim} for {(t_cont - t0) / 1000:.0f} s: its {len(before)} clusters "
        f"claimed by others after {(moved - t0) / 1000:.1f} s; 0 mutations under its old claims after that")
    return moved - t0


def members():
    st = json.loads(etcdctl("endpoint", "status", "-w", "json"))
    return [(e["Endpoint"], e["Status"]["header"]["member_id"], e["Status"]["leader"]) for e in st]


def etcd_healthy():
    try:
        etcdctl("endpoint", "health")
        return True
    except RuntimeError:
        return False


def leader_index():
    for ep, mid, leader in members():
        if mid == leader:
            return int(ep.rsplit(":", 1)[1]) - 23790 - int(os.environ.get("ETCD_PORT_OFFSET", "0"))
    fail("no etcd leader")


def progress_after(t0, replicas):
    """ms after t0 until every replica in `replicas` committed the spec applied at t0 for
    each cluster it holds (its SpecApplied event in etcd, written under its claim); None
    while one has not yet."""
    owner = {c: o for c, (o, _) in claims_retrying().items()}
    first = {}
    try:
        raw = prefixed("e/")
    except RuntimeError:
        return None
    done = {}
    for key, (value, _) in raw.items():
        cluster = key.split("/", 1)[0]
        e = json.loads(value)
        if e["reason"] == "SpecApplied" and e["at"] >= t0:
            done[cluster] = min(done.get(cluster, e["at"]), e["at"])
    for cluster, r in owner.items():
        if r not in replicas:
            continue
        if cluster not in done:
            return None
        first[r] = max(first.get(r, 0), done[cluster] - t0)
    if set(first) != set(replicas):
        return None
    return max(first.values())


def leader_trial(i):
    idx = leader_index()
    t0 = now_ms()
    subprocess.run(["bash", ETCD_SCRIPT, "kill-member", str(idx)], check=True)
    apply_retry()
    wait(60, lambda: progress_after(t0, live()) is not None,
         f"leader trial {i}: the replicas did not go on after the etcd leader was killed")
    took = progress_after(t0, live())
    subprocess.run(["bash", ETCD_SCRIPT, "start-member", str(idx)], check=True)
    say(f"trial {i}: etcd leader (member {idx}) killed: every replica committed the spec applied then within {took / 1000:.1f} s")
    return took


def apply_retry(again=False):
    """Applies all clusters (the next image, unless `again`), again and again for up
    to 30 s while the API answers with an error."""
    end = time.time() + 30
    while True:
        try:
            return apply_all(live()[0], again)
        except Exception:
            if time.time() > end:
                raise
            again = True
            time.sleep(0.5)


def quorum_trial(i):
    # etcd may still be electing after the trial before: the API says 503, try again.
    apply_retry(again=False)
    time.sleep(1)
    lost = [j for j in range(3) if j != leader_index()][:1] + [leader_index()]
    t0 = now_ms()
    for j in lost:
        subprocess.run(["bash", ETCD_SCRIPT, "kill-member", str(j)], check=True)
    time.sleep(TTL + 8)
    cut = t0 + TTL * 1000
    late = [m for m in mutations() if m["logged_ms"] > cut and m["ok"]]
    if late:
        fail(f"quorum trial {i}: {len(late)} mutation(s) more than the {TTL} s TTL after quorum was lost: {late[:3]}")
    last = max((m["logged_ms"] for m in mutations() if m["logged_ms"] >= t0), default=t0)
    t1 = now_ms()
    for j in lost:
        subprocess.run(["bash", ETCD_SCRIPT, "start-member", str(j)], check=True)
    # etcd's own recovery first: a replica cannot renew before a quorum answers.
    wait(60, etcd_healthy, f"quorum trial {i}: etcd itself did not regain its quorum", every=0.2)
    healthy = now_ms() - t1
    apply_retry()
    wait(90, lambda: progress_after(t1, live()) is not None,
         f"quorum trial {i}: the replicas did not resume after quorum returned")
    took = progress_after(t1, live())
    say(f"trial {i}: 2 of 3 etcd members killed: last mutation {(last - t0) / 1000:.1f} s after, none past "
        f"the {TTL} s TTL; etcd healthy again {healthy / 1000:.1f} s after the members restarted; every "
        f"replica committed again {took / 1000:.1f} s after they restarted")
    return last - t0, took


def settle(what):
    """Each trial starts from a fleet at rest: the rollout it began has finished."""
    wait(300, all_ready, f"{what}: its rollout did not finish", every=2)


def settled(value, what):
    settle(what)
    return value


def summary(name, values):
    v = [x / 1000 for x in values if x is not None]
    if not v:
        return
    line = (f"| {name} | {len(v)} | {statistics.median(v):.1f} s | {max(v):.1f} s |")
    report.append(line)


def twins():
    """examples/opennebula-twins.yaml: two OpenNebula clusters with the same templates."""
    docs = []
    with open("examples/opennebula-twins.yaml") as f:
        for doc in f.read().split("\n---\n"):
            name = "sylva-a" if "name: sylva-a" in doc else "sylva-b"
            # Read through the kubeconfig sim serve writes: their own bootstrap (none).
            docs.append(doc.rstrip() + f"\n  workload:\n    kubeconfig: {WORK}/kube/{name}.kubeconfig\n"
                        "  bootstrap: {provider: none}\n")
    return "---\n".join(docs).encode()


def driving(prefix):
    """The clusters named `prefix`... each live replica drives, from its API."""
    return {r: [d for d in api(r, "/api/v1/clusters")["items"] if d["name"].startswith(prefix)]
            for r in live()}


def f1_phase():
    """F1 across replicas: two OpenNebula clusters sharing templates and an image, built
    and then deleted at once, wherever the claims put them. From the mutation log: each
    template registered once and deleted once, only after every VM was terminated."""
    apply_retry_body(twins())
    items = lambda: [d for ds in driving("sylva-").values() for d in ds]
    wait(300, lambda: len(items()) == 2 and all(d["ready"] for d in items()),
         "the OpenNebula twins did not become ready", every=1)
    holders = {d["name"]: r for r, ds in driving("sylva-").items() for d in ds}
    for name, r in holders.items():
        req = urllib.request.Request(api_base(r) + f"/api/v1/clusters/{name}", method="DELETE")
        req.add_header("Authorization", f"Bearer {api_token(r)}")
        urllib.request.urlopen(req, timeout=30).read()
    wait(300, lambda: not items(), "the OpenNebula twins were not deleted", every=1)
    ops = [m for m in mutations() if m["ok"]]
    count = lambda op: sum(1 for m in ops if m["operation"] == op)
    terminated = max(m["logged_ms"] for m in ops if m["operation"] == "one.vm.action")
    deleted = [m["logged_ms"] for m in ops if m["operation"] == "one.template.delete"]
    if count("one.template.allocate") != 2 or len(deleted) != 2 or min(deleted) < terminated:
        fail(f"F1: templates allocated {count('one.template.allocate')}, deleted {len(deleted)} "
             f"(first {min(deleted, default=0) - terminated} ms after the last VM action)")
    say(f"ok: F1 across replicas: the twins (held by {holders}) registered each template once, "
        f"and the last holder deleted each once, after every VM was terminated")


def api_base(r):
    with open(f"{WORK}/{r}/api.url") as f:
        return f.read().strip()


def api_token(r):
    with open(f"{WORK}/{r}/admin.token") as f:
        return f.read().strip()


def apply_retry_body(body):
    end = time.time() + 30
    while True:
        try:
            return api(live()[0], "/api/v1/clusters", body)
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.5)


def main():
    sim_log = open(f"{WORK}/sim.log", "w")
    sim = subprocess.Popen(
        [FD, "sim", "serve", "--listen", "127.0.0.1:0", "--speed", os.environ.get("SIM_SPEED", "10"),
         "--clouds-file", f"{WORK}/clouds.yaml", "--mutation-log", MUTATIONS,
         "--kubernetes", "127.0.0.1:0", "--kubeconfig-dir", f"{WORK}/kube",
         "--opennebula", "127.0.0.1:0", "--one-auth-file", f"{WORK}/one_auth",
         "--one-xmlrpc-file", f"{WORK}/one_xmlrpc"],
        stdout=sim_log, stderr=sim_log)
    try:
        wait(30, lambda: os.path.exists(f"{WORK}/clouds.yaml") and os.path.exists(f"{WORK}/one_xmlrpc")
             and os.path.getsize(f"{WORK}/one_xmlrpc") > 0, "sim serve did not start")
        for r in REPLICAS:
            start_replica(r)
        wait(30, lambda: len(prefixed("replicas/")) == 3, "the three replicas did not register")
        say("ok: three replicas registered in etcd")
        apply_all("r0")
        wait(60, share_ok, "the 30 clusters were not shared out")
        time.sleep(2 * TTL / 3 + 1)
        check_share()
        wait(300, all_ready, "the 30 clusters did not all become ready", every=2)
        say(f"ok: the replicas built the 30 clusters ({len(mutations())} mutations); all ready")
        takeovers, progress = [], []
        for i in range(KILL_TRIALS):
            t, p = kill_trial(i)
            takeovers.append(t)
            progress.append(p)
        summary("kill -9 of a replica: its clusters taken up by others", takeovers)
        summary("kill -9 of a replica: first mutation by the new holder", progress)
        moves = [stop_trial(i) for i in range(STOP_TRIALS)]
        summary(f"SIGSTOP {PAUSE} s: the stopped replica's claims moved", moves)
        leader = [leader_trial(i) for i in range(LEADER_TRIALS)]
        summary("kill -9 of the etcd leader: every replica committing again", leader)
        quorum = [quorum_trial(i) for i in range(QUORUM_TRIALS)]
        summary("2 of 3 etcd members lost: last mutation after", [q[0] for q in quorum])
        summary("quorum back: every replica committing again", [q[1] for q in quorum])
        wait(300, lambda: not duplicates(), f"duplicate servers: {duplicates()}", every=2)
        say("ok: no two live servers share a name (replayed from the mutation log)")
        check_share()
        f1_phase()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
        sim.terminate()
    head = ["| failover | trials | median | worst |", "|---|---|---|---|"]
    text = "\n".join(head + report) + "\n"
    os.makedirs("target/replicas", exist_ok=True)
    with open("target/replicas/report.md", "w") as f:
        f.write(text)
    say(text)
    say("== the replicas passed")


if __name__ == "__main__":
    main()
