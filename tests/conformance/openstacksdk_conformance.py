"""Conformance: OpenStack's own SDK (openstacksdk) against `flightdeck sim serve`.

Where the SDK and our simulator disagree, the simulator is wrong. Every check asserts
field by field; the script prints one line per check and a closing
"N passed, M failed" line, and exits non-zero on any failure.
"""

import base64
import sys
import time
import traceback

import openstack
from openstack import exceptions

conn = openstack.connect()  # OS_CLIENT_CONFIG_FILE / OS_CLOUD from the script
state = {}


def wait(predicate, what, timeout=60.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def test_keystone_issues_a_token_and_a_catalog():
    assert conn.session.get_token()
    for service in ("compute", "network", "load-balancer", "image"):
        url = conn.session.get_endpoint(service_type=service, interface="public")
        assert url and url.startswith("http://127.0.0.1:"), (service, url)


def test_wrong_password_is_refused_with_keystones_answer():
    from keystoneauth1 import exceptions as ka_exceptions
    from keystoneauth1 import identity, session

    auth = identity.Password(
        auth_url=conn.config.auth["auth_url"],
        username=conn.config.auth["username"],
        password="not-the-password",
        project_name=conn.config.auth["project_name"],
        user_domain_name="Default",
        project_domain_name="Default",
    )
    try:
        session.Session(auth=auth).get_token()
    except ka_exceptions.Unauthorized as e:
        assert e.http_status == 401, e.http_status
        assert "requires authentication" in str(e), str(e)
    else:
        raise AssertionError("a wrong password was accepted")


def test_flavor_image_network_and_subnet_are_found_by_name():
    flavor = conn.compute.find_flavor("m1.small", ignore_missing=False)
    assert flavor.name == "m1.small" and flavor.vcpus >= 1 and flavor.ram > 0
    image = conn.image.find_image("ubuntu-22.04", ignore_missing=False)
    assert image.name == "ubuntu-22.04"
    net = conn.network.find_network("private", ignore_missing=False)
    sub = conn.network.find_subnet("private-subnet", ignore_missing=False)
    assert sub.network_id == net.id and sub.cidr and sub.ip_version == 4
    state.update(flavor=flavor, image=image, net=net, sub=sub)


def test_security_group_and_rule_create_and_duplicate_rule_conflict():
    sg = conn.network.create_security_group(name="conf-sg", description="conformance")
    assert sg.name == "conf-sg" and sg.id
    egress = [r for r in sg.security_group_rules if r["direction"] == "egress"]
    assert len(egress) == 2, sg.security_group_rules
    rule = conn.network.create_security_group_rule(
        security_group_id=sg.id, direction="ingress", ethertype="IPv4",
        protocol="tcp", remote_ip_prefix="10.244.0.0/16")
    assert rule.direction == "ingress" and rule.protocol == "tcp"
    assert rule.remote_ip_prefix == "10.244.0.0/16" and rule.security_group_id == sg.id
    try:
        conn.network.create_security_group_rule(
            security_group_id=sg.id, direction="ingress", ethertype="IPv4",
            protocol="tcp", remote_ip_prefix="10.244.0.0/16")
    except exceptions.ConflictException as e:
        assert "already exists" in str(e), str(e)
    else:
        raise AssertionError("a duplicate rule did not raise the conflict")
    state["sg"] = sg


def test_server_create_goes_build_then_active_and_show_matches():
    user_data = base64.b64encode(b"#cloud-config\nhostname: conf-1\n").decode()
    s = conn.compute.create_server(
        name="conf-1", flavor_id=state["flavor"].id, image_id=state["image"].id,
        networks=[{"uuid": state["net"].id}], security_groups=[{"name": "conf-sg"}],
        user_data=user_data)
    first = conn.compute.get_server(s.id)
    assert first.status in ("BUILD", "ACTIVE"), first.status
    seen_build = first.status == "BUILD"
    s = conn.compute.wait_for_server(s, interval=0.2, wait=30)
    assert s.status == "ACTIVE", s.status
    assert s.name == "conf-1"
    assert [g["name"] for g in s.security_groups] == ["conf-sg"]
    addrs = s.addresses["private"]
    assert addrs and addrs[0]["version"] == 4 and addrs[0]["addr"]
    assert s.flavor.name == "m1.small"
    assert seen_build, "the server never showed BUILD"
    assert "conf-1" in [x.name for x in conn.compute.servers()]
    # Nova keeps the user data and shows it back (OS-EXT-SRV-ATTR:user_data, 2.3+).
    assert conn.compute.get_server(s.id).user_data == user_data
    state["server"] = s


def test_load_balancer_listener_pool_member_with_status_transitions():
    lb = conn.load_balancer.create_load_balancer(name="conf-lb", vip_subnet_id=state["sub"].id)
    assert lb.provisioning_status == "PENDING_CREATE", lb.provisioning_status
    lb = conn.load_balancer.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    assert lb.provisioning_status == "ACTIVE" and lb.vip_address
    listener = conn.load_balancer.create_listener(
        loadbalancer_id=lb.id, protocol="TCP", protocol_port=6443, name="conf-l")
    assert listener.protocol_port == 6443
    try:
        conn.load_balancer.create_pool(listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN")
    except exceptions.ConflictException as e:
        assert "immutable" in str(e), str(e)
    else:
        raise AssertionError("a change on a PENDING_UPDATE load balancer was not refused")
    conn.load_balancer.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    pool = conn.load_balancer.create_pool(
        listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN", name="conf-p")
    conn.load_balancer.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    address = state["server"].addresses["private"][0]["addr"]
    member = conn.load_balancer.create_member(pool, address=address, protocol_port=6443, name="conf-m")
    assert member.provisioning_status == "PENDING_CREATE", member.provisioning_status
    assert member.address == address and member.protocol_port == 6443
    conn.load_balancer.wait_for_load_balancer(lb.id, interval=0.2, wait=30)
    member = wait(lambda: (m := conn.load_balancer.get_member(member, pool)).provisioning_status == "ACTIVE" and m,
                  "the member to go ACTIVE")
    assert member.operating_status == "NO_MONITOR", member.operating_status
    assert [m.name for m in conn.load_balancer.members(pool)] == ["conf-m"]
    state["lb"] = lb


def test_cascade_delete_takes_the_load_balancer_and_its_children():
    lb = state["lb"]
    conn.load_balancer.delete_load_balancer(lb.id, cascade=True)
    wait(lambda: conn.load_balancer.find_load_balancer(lb.id, ignore_missing=True) is None,
         "the load balancer to be gone")
    assert not [p for p in conn.load_balancer.pools() if p.name == "conf-p"]


def test_server_delete_and_security_group_delete():
    s = state["server"]
    conn.compute.delete_server(s)
    conn.compute.wait_for_delete(s, interval=0.2, wait=30)
    conn.network.delete_security_group(state["sg"])
    assert conn.network.find_security_group("conf-sg", ignore_missing=True) is None


def main():
    tests = [v for k, v in globals().items() if k.startswith("test_")]
    passed = failed = 0
    for t in tests:
        try:
            t()
        except Exception:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL {t.__name__}")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {t.__name__}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
