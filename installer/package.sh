#!/usr/bin/env bash
# `make package`: the sdist, the wheel and the Debian package of this tree, in dist/.
#
#   installer/package.sh            # dist/gpufleet-V.tar.gz, gpufleet-V-py3-none-any.whl,
#                                   # gpufleet-daemon_V_ARCH.deb
#   installer/package.sh --no-deb   # only the Python packages (any OS)
#
# The build frontend (PyPA's `build`) lives in build/package-venv, made on the
# first run; `python -m build` fetches setuptools into an isolated environment,
# and the .deb's venv fetches the daemon's dependencies: PyPI, or the PIP_*
# options of the environment. The generated protobuf modules are committed
# (protos/generate.sh), so neither build needs grpcio-tools.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
tools=build/package-venv
deb=yes
case "${1:-}" in
  --no-deb) deb=no ;;
  "") ;;
  -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "package: unknown argument: $1" >&2; exit 2 ;;
esac

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)"
[ -n "$version" ] || { echo "package: no version in pyproject.toml" >&2; exit 1; }
if [ ! -x "$tools/bin/pyproject-build" ]; then
  "$python" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "build>=1.2"
fi

# Only this version's files: an old wheel in dist/ must not end up in the .deb.
rm -f "dist/gpufleet-$version.tar.gz" "dist/gpufleet-$version-"*.whl
# The wheel is built from the sdist, so a file missing from the sdist fails here.
"$tools/bin/pyproject-build" --outdir dist .
wheel="dist/gpufleet-$version-py3-none-any.whl"
[ -f "$wheel" ] || { echo "package: $wheel was not built" >&2; exit 1; }
if [ "$deb" = yes ]; then
  installer/deb/build-deb.sh "$wheel" dist >/dev/null
fi
ls -l dist/
