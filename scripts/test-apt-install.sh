#!/usr/bin/env bash
# Checks scripts/apt-install.sh (the package step of scripts/setup.sh and .ci/run) as root
# without sudo (SUDO empty) and as a user with sudo, with stub dpkg/apt-get/sudo commands that
# only record how they were called: nothing is installed. Run by .ci/run.
set -euo pipefail
unset DEBIAN_FRONTEND
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
# dpkg: every package but "present" is missing.
cat > "$tmp/bin/dpkg" <<'STUB'
#!/bin/sh
[ "$2" = present ]
STUB
# apt-get: records its arguments and DEBIAN_FRONTEND.
cat > "$tmp/bin/apt-get" <<'STUB'
#!/bin/sh
echo "apt-get $* frontend=${DEBIAN_FRONTEND:-unset}" >> "$LOG"
STUB
# sudo: records that it was used, then runs the command.
cat > "$tmp/bin/sudo" <<'STUB'
#!/bin/sh
echo "sudo" >> "$LOG"
exec "$@"
STUB
chmod +x "$tmp/bin/"*
export PATH="$tmp/bin:$PATH"
check() { # SUDO value, expected log
  export LOG="$tmp/log"
  : > "$LOG"
  (SUDO="$1"; . "$here/apt-install.sh"; apt_install present tcpdump libpcap-dev)
  if [ "$(cat "$LOG")" != "$2" ]; then
    echo "apt_install with SUDO='$1' ran:"; cat "$LOG"
    echo "expected:"; echo "$2"
    exit 1
  fi
}
check "" "apt-get update -qq frontend=unset
apt-get install -y -qq tcpdump libpcap-dev frontend=noninteractive"
check "sudo" "sudo
apt-get update -qq frontend=unset
sudo
apt-get install -y -qq tcpdump libpcap-dev frontend=noninteractive"
echo "apt-install: ok as root without sudo and as a user with sudo"
