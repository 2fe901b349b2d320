#!/usr/bin/env bash
# Checks the bootstrap data flightdeck writes (crates/guest: a machine's #cloud-config
# with its kubeadm configuration) against cloud-init's own schema: renders samples for
# each role (init, control-plane join, worker join) and for Kubernetes v1.30.0 (kubeadm
# v1beta3) and v1.31.0 (v1beta4) with the render_samples example, and runs
# `cloud-init schema --config-file` on each. Fails on any error, and on any other
# output than cloud-init's "Valid cloud-config" line (a deprecation or a warning
# fails too). Installs Debian's cloud-init when missing.
# The samples hold a PKI and a token made for them alone; they are removed after.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/need-package.sh cloud-init cloud-init

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== rendering samples (cargo run --release -p flightdeck-guest --example render_samples)"
# In release, as CI's build is: the example shares its dependencies' builds.
cargo run --quiet --release -p flightdeck-guest --example render_samples -- "$work" > /dev/null

expected=6
found=0
failed=0
for file in "$work"/*.yaml; do
  [ -e "$file" ] || continue
  found=$((found + 1))
  name=$(basename "$file")
  if output=$(cloud-init schema --config-file "$file" 2>&1) \
    && [ "$output" = "Valid cloud-config: $file" ]; then
    echo "ok    $name: valid cloud-config"
  else
    echo "FAIL  $name:"
    sed 's/^/      /' <<< "$output"
    failed=$((failed + 1))
  fi
done

if [ "$found" != "$expected" ]; then
  echo "== expected $expected samples, found $found"
  exit 1
fi
if [ "$failed" != 0 ]; then
  echo "== $failed of $found samples are not clean cloud-config"
  exit 1
fi
echo "== all $found samples are valid cloud-config ($(cloud-init --version 2>&1))"
