#!/usr/bin/env bash
# Set up a checkout for the demo or the tests on Debian/Ubuntu: the system
# packages PySide6 and the tests need, a virtual environment in .venv, and the
# project installed into it (editable, with the console and test extras).
#
# Usage: installer/dev-setup.sh demo|test
# Needs root or sudo only when a Debian package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-test}"
python="${PYTHON:-python3}"
venv="${VENV:-.venv}"

# Libraries PySide6 loads at import time (a minimal Debian root has none of them).
qt_runtime="libgl1 libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0"
# Qt's xcb platform (a real window on X11) aborts at start without these.
qt_xcb="libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
        libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xkb1"
case "$purpose" in
  demo) packages="$qt_runtime $qt_xcb python3-venv" ;;
  # gcc builds the fake libnvidia-ml.so.1; procps gives ps and pgrep for debugging test runs;
  # strace records a stopping daemon's syscalls (tests/node_daemon/test_daemon_signals.py).
  # python3-venv is Debian's python3 making venvs: install.sh's, and the Debian package's
  # (installer/deb/build-deb.sh; dpkg-deb and unshare are in the essential dpkg and util-linux).
  # systemd gives systemd-analyze (unit checks; nothing is started), desktop-file-utils
  # and shellcheck check the installer; systemd-container lets one test boot the
  # installer in a throwaway container (it skips without it), where polkitd
  # answers systemd for the daemon's workload units; nodejs runs the polkit rule.
  # $qt_xcb: the keyboard tests run again in a real X server (Xvfb) through Qt's xcb;
  # openbox and xdotool: tests/console/test_real_x.py's window manager and real input.
  # xdg-desktop-portal with its GTK backend serves the desktop's colour scheme from
  # GSettings (gsettings-desktop-schemas; gsettings and gdbus are in libglib2.0-bin):
  # tests/console/test_desktop_colour_scheme.py changes it as a desktop would.
  # Slurm (22.05 on bookworm) is installed, not unpacked: its binaries load plugins from
  # a fixed path. Its services start only with /etc/slurm/slurm.conf, which this does not
  # write; tests/slurm starts its own daemons from a generated configuration. The JWT
  # plugin is a package of its own (auth/jwt, which slurmrestd's tokens need). slurmdbd
  # and MariaDB give the test cluster Slurm's accounting (sacct): tests/slurm/accounting.py
  # runs its own MariaDB (a temporary datadir, a free port); on a host with systemd the
  # package also starts the system's (`systemctl disable --now mariadb` if unwanted).
  test) packages="$qt_runtime $qt_xcb gcc libc6-dev procps strace python3-venv dbus-daemon dunst xvfb
        openbox xdotool xdg-desktop-portal xdg-desktop-portal-gtk gsettings-desktop-schemas
        libglib2.0-bin systemd desktop-file-utils shellcheck systemd-container polkitd nodejs
        munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin
        slurmdbd mariadb-server mariadb-client"
        # Real peers the tests talk to. Unpacked into .tools/ rather than
        # installed: installing would enable and start their system services.
        tools="prometheus-alertmanager prometheus" ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

missing_packages() {
  local p
  for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

install_system_packages() {
  command -v dpkg-query >/dev/null || {
    echo "dev-setup: not a Debian/Ubuntu system; make sure these are installed: $packages" >&2
    return 0
  }
  local missing sudo=""
  missing=$(missing_packages | tr '\n' ' ')
  [ -n "${missing// /}" ] || return 0
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "dev-setup: need root to install: $missing" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "dev-setup: installing Debian packages: $missing"
  $sudo apt-get update -qq
  # shellcheck disable=SC2086 # one word per package, on purpose
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

install_python_packages() {
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # Reinstall only when the dependencies changed.
  local stamp
  stamp="$venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
  [ -f "$stamp" ] && return 0
  echo "dev-setup: installing Python packages into $venv (first run takes a few minutes)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[console,test]"
  rm -f "$venv"/.installed-*
  touch "$stamp"
}

# Print the path of the newest downloaded .deb of a package, or nothing.
download_deb() {
  (cd .tools/debs && apt-get download -qq "$1" >/dev/null 2>&1) || return 0
  find .tools/debs -name "${1}_*.deb" -printf '%T@ %p\n' | sort -rn | head -1 | cut -d' ' -f2
}

# Unpack Debian packages of servers the tests start themselves into .tools/.
install_tools() {
  local tool deb
  [ -n "${tools:-}" ] || return 0
  command -v apt-get >/dev/null || { echo "dev-setup: no apt-get; tests needing $tools skip" >&2; return 0; }
  mkdir -p .tools/debs
  for tool in $tools; do
    [ -e ".tools/$tool.unpacked" ] && continue
    deb=$(download_deb "$tool")
    if [ -z "$deb" ] && [ "$(id -u)" = 0 ]; then
      apt-get update -qq
      deb=$(download_deb "$tool")
    fi
    if [ -z "$deb" ]; then
      echo "dev-setup: could not download $tool; the tests that need it will skip" >&2
      continue
    fi
    dpkg-deb -x "$deb" .tools/root && touch ".tools/$tool.unpacked"
  done
  place_alertmanager_template
}

# Debian's Alertmanager reads its notification templates from a fixed path; put
# those data files there (no package, no service).
place_alertmanager_template() {
  local dir=/usr/share/prometheus/alertmanager sudo=""
  [ -d ".tools/root$dir" ] && [ ! -f "$dir/email.tmpl" ] || return 0
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "dev-setup: need root for $dir; Alertmanager tests will fail" >&2; return 0; }
    sudo="sudo"
  fi
  $sudo mkdir -p "$dir"
  $sudo install -m 0644 ".tools/root$dir"/*.tmpl "$dir/"
}

install_system_packages
install_tools
install_python_packages
echo "dev-setup: ready ($venv)"
