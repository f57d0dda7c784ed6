# shellcheck shell=bash
# Sourced by install.sh, install-console.sh and uninstall.sh: how they speak, how
# --dry-run holds them back, the options they share, and (for the two install
# scripts, which source stage-checkout.sh too) the venv gpufleet goes into. The
# caller sets `script` (the name its messages start with), `prefix`, `dry_run`
# (and `python`, `source_path`, `venv` where it installs), and defines usage.

say() { printf '%s: %s\n' "$script" "$*"; }
die() { printf '%s: error: %s\n' "$script" "$*" >&2; exit 1; }

# Run a command, or only show it with --dry-run.
run() {
  if [ "$dry_run" = yes ]; then
    printf '  would run:'; printf ' %q' "$@"; printf '\n'
  else
    "$@"
  fi
}

# One of the options every script takes (--prefix DIR, --dry-run, --help), the
# first of the words given; anything else is refused. Sets `taken` to how many
# words it used, so the caller shifts them off.
common_option() {
  taken=1
  case "$1" in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix="$2"; taken=2 ;;
    --prefix=*) prefix="${1#*=}" ;;
    --dry-run) dry_run=yes ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
}

# --source PATH or --python PYTHON, what the two install scripts build from;
# sets `source_path` or `python`, and `taken` as common_option does.
source_option() {
  taken=1
  case "$1" in
    --source) [ $# -ge 2 ] || die "--source needs a path"; source_path="$2"; taken=2 ;;
    --source=*) source_path="${1#*=}" ;;
    --python) [ $# -ge 2 ] || die "--python needs an interpreter"; python="$2"; taken=2 ;;
    --python=*) python="${1#*=}" ;;
  esac
}

# The Python given by --python can make a venv for gpufleet (3.11 or newer).
# $1: how the apt-get hint starts ("sudo " for a script run as a user).
check_python() {
  command -v "$python" >/dev/null || die "$python not found; install Python 3.11 or newer"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" -V 2>&1); gpufleet needs Python 3.11 or newer (--python PYTHON)"
  "$python" -c 'import ensurepip, venv' 2>/dev/null ||
    die "$python cannot make virtual environments; on Debian/Ubuntu: ${1}apt-get install python3-venv"
}

# Make the venv $venv (or upgrade it in place) and install gpufleet from
# $source_path into it. A checkout is built from a copy (stage-checkout.sh), so
# the build leaves nothing in it, and always reinstalled, dependencies as
# needed; a wheel of the version already installed would be skipped, so it is
# replaced first, then a second pass brings any missing dependency.
# $1: the extras ("" or "[console]"), $2: what is installed, for the message.
install_gpufleet() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c '' 2>/dev/null; then
    say "upgrading the venv $venv in place"
  else
    say "creating the venv $venv"
    run mkdir -p "$(dirname "$venv")"
    run "$python" -m venv --clear "$venv"
  fi
  local target="$source_path" staging=""
  if [ -d "$source_path" ]; then
    staging="$(stage_checkout "$source_path")"
    # shellcheck disable=SC2064  # expand now: the path is fixed
    trap "rm -rf '$staging'" EXIT
    target="$staging"
  fi
  say "installing $2 from $source_path"
  local pip=("$venv/bin/python" -m pip install --disable-pip-version-check --quiet)
  if [ -z "$staging" ]; then
    run "${pip[@]}" --force-reinstall --no-deps "$target"
  fi
  run "${pip[@]}" "${target}$1"
}
