"""Prepares Debian's OpenStack for the real suite: a network, a subnet, a router on it, a second image,
and a clouds.yaml entry `fdstack` (admin, from the environment up.sh's adminrc sets)."""
import io
import os
import sys

import openstack

work = sys.argv[1]
c = openstack.connect()
net = c.network.find_network("fd-net") or c.network.create_network(name="fd-net")
if not c.network.find_subnet("fd-subnet"):
    c.network.create_subnet(name="fd-subnet", network_id=net.id, ip_version=4, cidr="10.10.0.0/24")
subnet = c.network.find_subnet("fd-subnet")
# The router pod routes (F7) go on; its interface on fd-subnet makes the machines'
# addresses valid next hops.
if not c.network.find_router("fd-router"):
    router = c.network.create_router(name="fd-router")
    c.network.add_interface_to_router(router, subnet_id=subnet.id)
if not c.image.find_image("fake-img-2", ignore_missing=True):
    c.create_image("fake-img-2", data=io.BytesIO(b"\0" * 1024), disk_format="raw",
                   container_format="bare", visibility="public", wait=True)
e = os.environ
clouds = f"""clouds:
  fdstack:
    auth:
      auth_url: {e['OS_AUTH_URL']}
      username: {e['OS_USERNAME']}
      password: {e['OS_PASSWORD']}
      project_name: {e['OS_PROJECT_NAME']}
      user_domain_name: {e.get('OS_USER_DOMAIN_NAME', 'Default')}
      project_domain_name: {e.get('OS_PROJECT_DOMAIN_NAME', 'Default')}
    region_name: {e.get('OS_REGION_NAME', 'RegionOne')}
    interface: public
"""
path = os.path.join(work, "clouds.yaml")
with open(path, "w") as f:
    f.write(clouds)
os.chmod(path, 0o600)
print("setup ok")
