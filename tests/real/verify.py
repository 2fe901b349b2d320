"""Checks with openstacksdk what flightdeck built on the real cloud.

  verify.py exists CLUSTER CP WORKERS IMAGE   every object exists as specified
  verify.py gone CLUSTER                      nothing carrying the cluster's tag remains
  verify.py cleanup CLUSTER                   deletes what an earlier, failed run left behind
  verify.py routes CLUSTER ROUTER CIDR        each server's pod network (a /24 of CIDR) is routed to it
  verify.py absent CLUSTER NAME               the server NAME is gone (replaced)
  verify.py kubeadm CLUSTER                   CLUSTER-cp-1's user data, read back from Nova, is
                                              flightdeck's kubeadm init document, and no worker
                                              was made before the cluster's API answered
"""
import sys

import openstack

c = openstack.connect()
mode, cluster = sys.argv[1], sys.argv[2]
tag = f"flightdeck-cluster={cluster}"
servers = [s for s in c.compute.servers(details=True, tags=tag)]
lbs = [lb for lb in c.load_balancer.load_balancers(tags=tag)]
groups = [g for g in c.network.security_groups(tags=tag)]

if mode == "cleanup":
    import time
    for lb in lbs:
        c.load_balancer.delete_load_balancer(lb.id, cascade=True, ignore_missing=True)
    for s in servers:
        c.compute.delete_server(s.id, ignore_missing=True)
    for _ in range(240):
        left = list(c.compute.servers(tags=tag)) + list(c.load_balancer.load_balancers(tags=tag))
        if not left:
            break
        time.sleep(1)
    for g in c.network.security_groups(tags=tag):
        c.network.delete_security_group(g.id, ignore_missing=True)
    router = c.network.find_router("fd-router")
    if router and router.routes:
        c.network.remove_extra_routes_from_router(router, body={"router": {"routes": router.routes}})
    print(f"cleaned up {len(servers)} server(s), {len(lbs)} load balancer(s), {len(groups)} group(s) of an earlier run")
    sys.exit(0)

def pod_routes(router_name, cidr):
    import ipaddress
    net = ipaddress.ip_network(cidr)
    router = c.network.find_router(router_name, ignore_missing=False)
    routes = router.routes or []
    return router, [r for r in routes if ipaddress.ip_network(r["destination"]).subnet_of(net)]

if mode == "routes":
    router, routes = pod_routes(sys.argv[3], sys.argv[4])
    addresses = sorted(list(s.addresses.values())[0][0]["addr"] for s in servers)
    nexthops = sorted(r["nexthop"] for r in routes)
    assert nexthops == addresses, f"pod routes {routes} do not match the servers {addresses}"
    assert all(r["destination"].endswith("/24") for r in routes), routes
    assert len({r["destination"] for r in routes}) == len(routes), routes
    print(f"verified: {len(routes)} pod route(s) on {router.name}, one to each of {len(servers)} server(s)")
    sys.exit(0)

if mode == "absent":
    names = [s.name for s in servers]
    assert sys.argv[3] not in names, f"{sys.argv[3]} is still there: {names}"
    print(f"verified: {sys.argv[3]} was replaced; servers now {sorted(names)}")
    sys.exit(0)

if mode == "gone":
    left = [s.name for s in servers] + [lb.name for lb in lbs] + [g.name for g in groups]
    assert not left, f"left behind after delete: {left}"
    print("nothing left")
    sys.exit(0)

if mode == "kubeadm":
    import base64

    import yaml

    init = f"{cluster}-cp-1"
    by_name = {s.name: s for s in servers}
    assert init in by_name, f"no server {init}: {sorted(by_name)}"
    # Workers join with a token made through the workload API, which never answers here.
    assert sorted(by_name) == [init], f"machines before the API answered: {sorted(by_name)}"
    data = c.compute.get_server(by_name[init].id).user_data
    assert data, (init, "no user_data")
    text = base64.b64decode(data).decode()
    assert text.startswith("#cloud-config\n"), text[:200]
    doc = yaml.safe_load(text)
    files = {f["path"]: f for f in doc["write_files"]}
    config = files.get("/run/kubeadm/kubeadm.yaml")
    assert config, f"no kubeadm configuration among {sorted(files)}"
    content = config["content"]
    if config.get("encoding") in ("b64", "base64"):
        content = base64.b64decode(content).decode()
    kinds = {d["kind"]: d for d in yaml.safe_load_all(content) if d}
    assert sorted(kinds) == ["ClusterConfiguration", "InitConfiguration"], sorted(kinds)
    for d in kinds.values():
        # v1.31.1: kubeadm's v1beta4.
        assert d["apiVersion"] == "kubeadm.k8s.io/v1beta4", d["apiVersion"]
    assert kinds["InitConfiguration"]["nodeRegistration"]["name"] == init, kinds["InitConfiguration"]
    cluster_config = kinds["ClusterConfiguration"]
    assert cluster_config["clusterName"] == cluster, cluster_config
    assert cluster_config["kubernetesVersion"] == "v1.31.1", cluster_config
    assert len(lbs) == 1, [x.name for x in lbs]
    endpoint = f"{lbs[0].vip_address}:6443"
    assert cluster_config["controlPlaneEndpoint"] == endpoint, (cluster_config, endpoint)
    for pki in ("ca", "etcd/ca", "front-proxy-ca"):
        for ext in ("crt", "key"):
            assert f"/etc/kubernetes/pki/{pki}.{ext}" in files, (pki, ext, sorted(files))
    assert "/etc/kubernetes/pki/sa.key" in files, sorted(files)
    commands = [" ".join(c) if isinstance(c, list) else c for c in doc["runcmd"]]
    assert any("kubeadm init --config /run/kubeadm/kubeadm.yaml" in c for c in commands), commands
    print(f"verified: {init}'s user data read back from Nova is kubeadm init (v1beta4) for {endpoint}, with the cluster's CAs")
    sys.exit(0)

cp, workers, image = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
image_id = c.image.find_image(image, ignore_missing=False).id
cps = [s for s in servers if s.name.startswith(f"{cluster}-cp-")]
wks = [s for s in servers if s.name.startswith(f"{cluster}-workers-")]
assert len(cps) == cp, [s.name for s in cps]
assert len(wks) == workers, [s.name for s in wks]
for s in servers:
    assert s.status == "ACTIVE", (s.name, s.status)
    assert any(t.startswith("flightdeck-uid=") for t in s.tags), s.tags
    assert [g["name"] for g in s.security_groups] == [f"{cluster}-nodes"], s.security_groups
for s in cps:
    assert s.image["id"] == image_id, (s.name, s.image)
# machine.userData reached Nova, its variables filled in for each machine.
import base64
expect = sys.argv[6] if len(sys.argv) > 6 else None
for s in cps:
    data = c.compute.get_server(s.id).user_data
    assert data, (s.name, "no user_data")
    text = base64.b64decode(data).decode()
    assert f"hostname: {s.name}\n" in text, (s.name, text)
    assert "control-plane of demo" in text, (s.name, text)
    if expect:
        assert expect in text, (s.name, expect, text)
assert len(lbs) == 1 and lbs[0].provisioning_status == "ACTIVE", [(x.name, x.provisioning_status) for x in lbs]
lb = lbs[0]
listeners = [x for x in c.load_balancer.listeners() if any(l["id"] == lb.id for l in x.load_balancers)]
assert [x.protocol_port for x in listeners] == [6443], listeners
pools = [p for p in c.load_balancer.pools() if any(l["id"] == lb.id for l in p.loadbalancers)]
assert len(pools) == 1
members = list(c.load_balancer.members(pools[0]))
addresses = sorted(list(s.addresses.values())[0][0]["addr"] for s in cps)
assert sorted(m.address for m in members) == addresses, (members, addresses)
assert all(m.provisioning_status == "ACTIVE" for m in members)
assert len(groups) == 1
rules = [r for r in groups[0].security_group_rules if r["direction"] == "ingress"]
assert sorted(r["protocol"] for r in rules) == ["icmp", "tcp", "udp"], rules
assert all(r["remote_ip_prefix"] == "10.244.0.0/16" for r in rules), rules
print(f"verified: {cp} control-plane on {image} with their user data, {workers} workers, load balancer with {len(members)} members, 3 rules")
