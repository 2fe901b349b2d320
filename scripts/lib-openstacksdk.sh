# The virtualenv with OpenStack's own SDK (pinned), under target/, made once. Source it
# from the repository's root; it sets `venv`.
OPENSTACKSDK_VERSION=4.22.0
venv=target/conformance-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import openstack" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openstacksdk==$OPENSTACKSDK_VERSION"
fi
