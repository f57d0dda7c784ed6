#!/usr/bin/env bash
# Build the Debian package gpufleet-daemon from a gpufleet wheel of this tree.
#
#   installer/deb/build-deb.sh dist/gpufleet-0.1.0-py3-none-any.whl dist/
#   installer/deb/build-deb.sh --version 0.1.1 WHEEL OUTDIR   # another package version
#
# The package holds a self-contained venv /opt/gpufleet/venv (the daemon only,
# no Qt; its dependencies come from PyPI, or PIP_INDEX_URL/PIP_FIND_LINKS, at
# build time), the unit, the polkit rule and the example config of installer/,
# and maintainer scripts (installer/deb/postinst, prerm, postrm) that share
# installer/service-setup.sh with install.sh. `make package` runs this.
#
# A venv works only at the path it was made at, so it is made at
# /opt/gpufleet/venv itself, in a private mount namespace (unshare) with a
# tmpfs over /opt: the build machine's /opt is never touched, and no root is
# needed where unprivileged user namespaces are allowed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
installer="$(dirname "$here")"
checkout="$(dirname "$installer")"
readonly PACKAGE=gpufleet-daemon
readonly UNIT=gpufleet-daemon.service
readonly POLKIT_RULE=50-gpufleet-workloads.rules
# Debian's own Python: the venv links to it, and its compiled wheels fit its minor version.
# python3.X, not python3: the venv's link must not follow python3 to another minor.
python="${DEB_PYTHON:-$(readlink -f /usr/bin/python3)}"
version=""

usage() {
  cat <<USAGE
usage: $0 [--version VERSION] WHEEL OUTDIR

  WHEEL              a gpufleet wheel (python -m build of this tree)
  OUTDIR             where ${PACKAGE}_VERSION_ARCH.deb is written
  --version VERSION  the package's Debian version (default: the wheel's, with a
                     PEP 440 pre-release as ~rc1, ~b1, ...)
Environment: DEB_PYTHON (default: what /usr/bin/python3 links to), DEB_COMPRESSION
(dpkg-deb -Z: xz, the default, or gzip, faster), pip's PIP_* options.
USAGE
}

say() { printf 'build-deb: %s\n' "$*" >&2; }
die() { printf 'build-deb: error: %s\n' "$*" >&2; exit 1; }

args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || die "--version needs a value"; version="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown argument: $1" ;;
    *) args+=("$1") ;;
  esac
  shift
done
[ "${#args[@]}" -eq 2 ] || { usage >&2; die "need WHEEL and OUTDIR"; }
wheel="$(realpath "${args[0]}")"
outdir="$(realpath -m "${args[1]}")"
[ -f "$wheel" ] || die "no wheel at $wheel"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian package dpkg)"
command -v unshare >/dev/null || die "unshare not found (Debian package util-linux)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  die "$python is $("$python" -V 2>&1); the daemon needs 3.11 or newer"
"$python" -c 'import ensurepip, venv' 2>/dev/null ||
  die "$python cannot make venvs: apt-get install python3-venv"

# PEP 440 pre-releases sort before the release; in Debian that is "~".
debian_version() {
  sed -E 's/\.?(a|b|rc|dev)([0-9]+)/~\1\2/g' <<<"$1"
}

# The version in the wheel's file name: gpufleet-VERSION-py3-none-any.whl.
wheel_version="$(basename "$wheel" | cut -d- -f2)"
# --version is a Debian version already, taken as it is.
[ -n "$version" ] || version="$(debian_version "$wheel_version")"
arch="$(dpkg --print-architecture)"
# The venv's python is Debian's python3.X: the package needs exactly that minor.
py_minor="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root/DEBIAN" "$root/opt/gpufleet"

# --- the venv, at its final path, in a private mount namespace -------------------
say "building the venv /opt/gpufleet/venv ($("$python" -V)) from $(basename "$wheel")"
ns=(unshare --mount --propagation private)
[ "$(id -u)" = 0 ] || ns=(unshare --map-root-user --mount --propagation private)

# Where no private mount namespace can be had (a chroot: its / is no mount point,
# so unshare cannot make it private), the venv is made beside the package's tree and
# moved: its own paths (the scripts' #! lines, activate, pyvenv.cfg) are rewritten to
# /opt/gpufleet/venv and its bytecode compiled again under that name.
relocated_venv() {
  local staged="$3/venv" final=/opt/gpufleet/venv
  "$1" -m venv "$staged"
  "$staged/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-warn-script-location "$2"
  "$staged/bin/gpufleet" daemon --help >/dev/null
  grep -rlIZ -F "$staged" "$staged/bin" "$staged/pyvenv.cfg" | xargs -0 -r sed -i "s|$staged|$final|g"
  find "$staged" -name __pycache__ -prune -exec rm -rf {} +
  "$1" -m compileall -q -s "$staged" -p "$final" "$staged/lib" >/dev/null
  ! grep -rqI -F "$staged" "$staged/bin" "$staged/pyvenv.cfg" || die "the venv still names $staged"
}

if ! "${ns[@]}" true 2>/dev/null; then
  say "no private mount namespace here (a chroot?): the venv is made beside the tree and moved"
  relocated_venv "$python" "$wheel" "$root/opt/gpufleet"
else
# shellcheck disable=SC2016  # expanded by the inner shell
"${ns[@]}" bash -euo pipefail -c '
  mount -t tmpfs tmpfs /opt
  "$1" -m venv /opt/gpufleet/venv
  /opt/gpufleet/venv/bin/python -m pip install --quiet --disable-pip-version-check \
    --no-warn-script-location "$2"
  /opt/gpufleet/venv/bin/gpufleet daemon --help >/dev/null
  tar -C /opt/gpufleet -cf - venv | tar -C "$3" -xf -
' build-venv "$python" "$wheel" "$root/opt/gpufleet"
fi

# --- the files of installer/, as they are (no copies kept in the tree) ----------
install -D -m 0644 "$installer/systemd/$UNIT" "$root/lib/systemd/system/$UNIT"
install -D -m 0644 "$installer/polkit/$POLKIT_RULE" "$root/usr/share/polkit-1/rules.d/$POLKIT_RULE"
install -D -m 0644 "$installer/config/daemon.toml" "$root/opt/gpufleet/share/daemon.toml"
install -D -m 0644 "$installer/service-setup.sh" "$root/opt/gpufleet/share/service-setup.sh"
install -D -m 0644 "$checkout/docs/operations.md" "$root/opt/gpufleet/doc/operations.md"
for script in postinst prerm postrm; do
  install -m 0755 "$here/$script" "$root/DEBIAN/$script"
done

installed_kib="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat >"$root/DEBIAN/control" <<CONTROL
Package: $PACKAGE
Version: $version
Architecture: $arch
Maintainer: gpufleet maintainers <gpufleet@localhost>
Section: admin
Priority: optional
Installed-Size: $installed_kib
Depends: python$py_minor, systemd, init-system-helpers, passwd, libc6 (>= 2.28)
Recommends: polkitd
Suggests: nvidia-driver
Description: GPU Fleet Console node daemon
 Samples this server's GPUs through NVML and serves them, with alerts,
 workloads and control, over gRPC; one of these per GPU server, watched from
 the gpufleet console. A self-contained virtual environment in /opt/gpufleet
 (no Qt), run by the hardened systemd unit gpufleet-daemon.service as the
 system user gpufleet. Configuration: /etc/gpufleet/daemon.toml; state (the
 journal, audit log, history and usage): /var/lib/gpufleet.
CONTROL

mkdir -p "$outdir"
deb="$outdir/${PACKAGE}_${version}_${arch}.deb"
# --root-owner-group: every file root's, whoever builds. xz: size (15 MB, gzip's is
# 26 MB) over build time (about 40 s of CPU, gzip's 2 s: tests set DEB_COMPRESSION=gzip).
dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$root" "$deb" >/dev/null
say "wrote $deb ($(du -h "$deb" | cut -f1))"
printf '%s\n' "$deb"
