#!/usr/bin/env bash
# Every lint run before a commit, in one go: clippy on the workspace, on the product built
# without the test bed (which must not depend on it), and on the etcd client (which needs
# protoc: scripts/need-protoc.sh installs it when missing).
# CI runs this in the background in its own target directory (LINT_TARGET_DIR), so that
# the check builds take the cores the test build leaves, and names a file to wait for
# (LINT_WAIT_FOR) before the etcd part: its background apt run is then done.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${LINT_TARGET_DIR:-}" ]; then
  export CARGO_TARGET_DIR=$LINT_TARGET_DIR
fi

echo "== cargo clippy -D warnings (the workspace, every target)"
cargo clippy --workspace --all-targets -- -D warnings

echo "== the product without the test bed: flightdeck built without the simulator"
cargo clippy -p flightdeck -p flightdeck-daemon --no-default-features -- -D warnings
tree=$(cargo tree -p flightdeck --edges normal --no-default-features)
if grep -E 'flightdeck-(scenario|sim|sim-http|embedded) ' <<< "$tree"; then
  echo "the product depends on the test bed"
  exit 1
fi

if [ -n "${LINT_WAIT_FOR:-}" ]; then
  echo "== waiting for $LINT_WAIT_FOR (at most 30 minutes; then protoc is installed here)"
  for _ in $(seq 360); do
    [ -e "$LINT_WAIT_FOR" ] && break
    sleep 5
  done
fi
echo "== cargo clippy -D warnings with the etcd client"
# shellcheck source=scripts/need-protoc.sh
. scripts/need-protoc.sh
cargo clippy -p flightdeck -p flightdeck-daemon -p flightdeck-etcd --features flightdeck/etcd,flightdeck-etcd/client --all-targets -- -D warnings
echo "== lints passed"
