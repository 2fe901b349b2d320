#!/usr/bin/env bash
# scripts/need-package.sh COMMAND PACKAGE...: installs the Debian PACKAGEs when COMMAND
# is not on the PATH, and fails, saying why, when it still is not after. For tests that
# need a program (the daemon's promtool test runs it): no check is skipped for a missing
# package. Another apt run may hold apt's locks (CI installs every package in the
# background, scripts/install-packages.sh, while the tests build and run): it is waited
# for, up to 15 minutes, and what it installed is used. Needs root or sudo without a
# password.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 COMMAND PACKAGE..." >&2
  exit 2
fi
command=$1
shift
command -v "$command" > /dev/null && exit 0
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! sudo -n true 2> /dev/null; then
    echo "$command is missing: install Debian's $* (as root, or with sudo)" >&2
    exit 1
  fi
  sudo=(sudo -n)
fi
echo "== $command is missing: installing $* (Debian)" >&2
deadline=$((SECONDS + 900))
while :; do
  # apt-get update does not wait for the lists' lock: a failure is tried again while
  # another apt run may hold it.
  if "${sudo[@]}" apt-get update -qq >&2 \
    && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" > /dev/null; then
    break
  fi
  command -v "$command" > /dev/null && exit 0
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "could not install $* within 15 minutes" >&2
    exit 1
  fi
  echo "== apt failed (another apt run may hold its locks); trying again in 5 s" >&2
  sleep 5
done
if ! command -v "$command" > /dev/null; then
  echo "$command is still missing after installing $*" >&2
  exit 1
fi
echo "== installed $*" >&2
