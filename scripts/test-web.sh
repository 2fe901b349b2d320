#!/usr/bin/env bash
# The web view in a real browser: Debian's chromium and chromium-driver, driven from
# Python selenium (scripts/web_test.py) against a real `flightdeck serve` with the
# embedded simulator. Installs what it needs: the two Debian packages, and selenium in a
# virtualenv under target/. Screenshots go to target/web (CI keeps them; the README's
# are copies in docs/screenshots).
set -euo pipefail
cd "$(dirname "$0")/.."

SPEED=${SPEED:-20}
SELENIUM_VERSION=4.27.1
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "== installing chromium and chromium-driver (Debian)"
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
fi
venv=target/web-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi

# shellcheck source=scripts/lib-flightdeck.sh
. scripts/lib-flightdeck.sh
work=$(mktemp -d)
out=$PWD/target/web
mkdir -p "$out"
rm -f "$out"/*.png
export FLIGHTDECK_STATE_DIR=$work/state
unset FLIGHTDECK_SERVER FLIGHTDECK_TOKEN FLIGHTDECK_CONFIG
# shellcheck source=scripts/lib-daemon.sh
. scripts/lib-daemon.sh
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== serve with the embedded simulator (${SPEED}x real time)"
start_serve --sim-speed "$SPEED"
url=$(cat "$FLIGHTDECK_STATE_DIR/api.url")
# The page and its assets need no token, and come with a strict content security policy.
curl -sfI "$url/" | grep -qi "^content-security-policy: default-src 'none'" || fail "/ has no content security policy"
curl -sf "$url/" | grep -q '<script src="/ui/app.js"' || fail "/ does not serve the page"
"$venv/bin/python" scripts/web_test.py "$url" "$FLIGHTDECK_STATE_DIR/admin.token" \
  "$FLIGHTDECK_STATE_DIR/viewer.token" examples/openstack.yaml "$out" || fail "the browser test failed"
# No token in the daemon's log.
for t in admin viewer; do
  if grep -qF "$(cat "$FLIGHTDECK_STATE_DIR/$t.token")" "$work/serve.log"; then fail "the $t token is in the daemon's log"; fi
done
echo "ok: neither token is in the daemon's log"
stop_serve
ls "$out"/*.png
echo "web view: passed"
