# Sourced by scripts/setup.sh and .ci/run: `apt_install PKG ...` installs the packages that
# dpkg does not know, as root directly or through sudo otherwise. `$SUDO env VAR=... cmd`,
# not `$SUDO VAR=... cmd`: with SUDO empty (root) the latter would run `VAR=...` as a command.
# scripts/test-apt-install.sh checks it with SUDO empty and with SUDO=sudo.
# SUDO already set (even empty) is kept: the test sets it.
if [ -z "${SUDO+x}" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
fi
apt_install() {
  local need="" p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
  done
  if [ -n "$need" ]; then
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need
  fi
}
