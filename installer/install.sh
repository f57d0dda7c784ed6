#!/usr/bin/env bash
# Install (or upgrade) the gpufleet node daemon on a GPU server.
#
#   sudo installer/install.sh                  # install or upgrade, enable and (re)start
#   installer/install.sh --prefix /tmp/root    # into a throwaway root (tests, packaging)
#   installer/install.sh --dry-run             # say what would be done, change nothing
#
# What it does (docs/operations.md explains each part):
#   - the system user and group `gpufleet` (home /var/lib/gpufleet, no login)
#   - a virtual environment /opt/gpufleet/venv with this checkout (or a wheel)
#     installed into it: the daemon only, no Qt
#   - /etc/gpufleet/daemon.toml from installer/config/daemon.toml, only if absent
#   - /etc/systemd/system/gpufleet-daemon.service (replaced on every run)
#   - /etc/polkit-1/rules.d/50-gpufleet-workloads.rules (replaced on every run):
#     lets the daemon start each workload as a transient unit as its owner
#   - systemctl daemon-reload, enable, start (restart when upgrading), only when
#     installing into / on a machine where systemd runs
# Running it again upgrades in place and keeps the configuration.
set -euo pipefail

readonly UNIT=gpufleet-daemon.service
readonly SERVICE_USER=gpufleet
readonly POLKIT_RULE=50-gpufleet-workloads.rules
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=stage-checkout.sh
. "$here/stage-checkout.sh"
# The steps the Debian package's postinst takes too (user, config, drop-ins).
# shellcheck source-path=SCRIPTDIR source=service-setup.sh
. "$here/service-setup.sh"
checkout="$(dirname "$here")"

prefix=""
source_path="$checkout"
python="${PYTHON:-python3}"
manage_users=yes
start=yes
dry_run=no

usage() {
  cat <<EOF
usage: $0 [--prefix DIR] [--source DIR|WHEEL] [--python PYTHON] [--no-users] [--no-start] [--dry-run]

  --prefix DIR     install under DIR instead of / (a throwaway root: no users are
                   created and systemd is not touched)
  --source PATH    the project checkout or a gpufleet wheel to install
                   (default: $checkout)
  --python PYTHON  the Python (3.11 or newer) that makes the venv (default: python3)
  --no-users       do not create the gpufleet user and group
  --no-start       install, but do not reload, enable or start the unit
  --dry-run        print what would be done; change nothing
Extra pip options come from the environment (PIP_INDEX_URL, PIP_FIND_LINKS, ...).
EOF
}

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

# Run a command, or only show it with --dry-run.
run() {
  if [ "$dry_run" = yes ]; then
    printf '  would run:'; printf ' %q' "$@"; printf '\n'
  else
    "$@"
  fi
}

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix="$2"; shift ;;
      --prefix=*) prefix="${1#*=}" ;;
      --source) [ $# -ge 2 ] || die "--source needs a path"; source_path="$2"; shift ;;
      --source=*) source_path="${1#*=}" ;;
      --python) [ $# -ge 2 ] || die "--python needs an interpreter"; python="$2"; shift ;;
      --python=*) python="${1#*=}" ;;
      --no-users) manage_users=no ;;
      --no-start) start=no ;;
      --dry-run) dry_run=yes ;;
      -h|--help) usage; exit 0 ;;
      *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
  done
}

# Paths inside the target root ("" for /).
set_paths() {
  [ -z "$prefix" ] || prefix="$(realpath -m "$prefix")"
  [ "$prefix" != / ] || prefix=""
  [ ! -e "$source_path" ] || source_path="$(realpath "$source_path")"
  opt_dir="$prefix/opt/gpufleet"
  venv="$opt_dir/venv"
  config_dir="$prefix/etc/gpufleet"
  unit_dir="$prefix/etc/systemd/system"
  polkit_dir="$prefix/etc/polkit-1/rules.d"
}

check_prerequisites() {
  [ -f "$here/systemd/$UNIT" ] || die "$here/systemd/$UNIT is missing: run this from a gpufleet checkout"
  [ -f "$here/polkit/$POLKIT_RULE" ] || die "$here/polkit/$POLKIT_RULE is missing: run this from a gpufleet checkout"
  [ -e "$source_path" ] || die "--source $source_path does not exist"
  if [ -z "$prefix" ] && [ "$(id -u)" != 0 ] && [ "$dry_run" = no ]; then
    die "installing into / needs root: sudo $0 $*"
  fi
  command -v "$python" >/dev/null || die "$python not found; install Python 3.11 or newer"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" -V 2>&1); gpufleet needs Python 3.11 or newer (--python PYTHON)"
  "$python" -c 'import ensurepip, venv' 2>/dev/null ||
    die "$python cannot make virtual environments; on Debian/Ubuntu: apt-get install python3-venv"
}

create_service_user() {
  if [ -n "$prefix" ]; then
    say "not creating user $SERVICE_USER: installing under --prefix $prefix"
    return 0
  fi
  if [ "$manage_users" = no ]; then
    say "not creating user $SERVICE_USER (--no-users): the unit needs it to start"
    return 0
  fi
  gf_ensure_service_user
}

# Build from a copy of the checkout, so the build leaves nothing in it.
install_venv() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c '' 2>/dev/null; then
    say "upgrading the venv $venv in place"
  else
    say "creating the venv $venv"
    run mkdir -p "$opt_dir"
    run "$python" -m venv --clear "$venv"
  fi
  local target="$source_path" staging=""
  if [ -d "$source_path" ]; then
    staging="$(stage_checkout "$source_path")"
    # shellcheck disable=SC2064  # expand now: the path is fixed
    trap "rm -rf '$staging'" EXIT
    target="$staging"
  fi
  say "installing gpufleet (daemon only, no Qt) from $source_path"
  local pip=("$venv/bin/python" -m pip install --disable-pip-version-check --quiet)
  if [ -z "$staging" ]; then
    # A wheel of the version already installed would be skipped: replace it,
    # then let a second pass bring any missing dependency.
    run "${pip[@]}" --force-reinstall --no-deps "$target"
  fi
  # A project directory is always built and reinstalled, dependencies as needed.
  run "${pip[@]}" "$target"
  run "$venv/bin/gpufleet" daemon --help >/dev/null
}

install_docs() {
  if [ -f "$checkout/docs/operations.md" ]; then
    run install -D -m 0644 "$checkout/docs/operations.md" "$opt_dir/doc/operations.md"
  fi
}

install_config() {
  # Under --prefix no user is made: the file stays root's, world-readable.
  local group="$SERVICE_USER"
  [ -z "$prefix" ] || group=""
  gf_install_default_config "$here/config/daemon.toml" "$config_dir" "$group"
}

# The daemon loads the config the way it will at start; a bad one stops us
# before a restart would take a working daemon down.
check_config() {
  local config="$config_dir/daemon.toml"
  [ "$dry_run" = no ] || return 0
  gf_check_config "$venv/bin/python" "$config" ||
    die "fix $config, then run $0 again (the daemon was not restarted)"
  say "configuration $config is valid"
}

install_unit() {
  local unit="$unit_dir/$UNIT"
  run install -d -m 0755 "$unit_dir"
  if [ -f "$unit" ] && cmp -s "$here/systemd/$UNIT" "$unit"; then
    say "unit $unit is current"
  else
    say "installing the unit $unit (local changes belong in: systemctl edit gpufleet-daemon)"
    run install -m 0644 "$here/systemd/$UNIT" "$unit"
  fi
  if [ -z "$prefix" ]; then
    gf_video_group_dropin "$unit.d"
  fi
}

# The daemon starts each workload as a transient systemd unit running as its
# owner; polkit must let the unprivileged gpufleet user ask systemd for that.
# On systemd 252 this grant is root-equivalent: docs/operations.md says why.
install_polkit_rule() {
  local rule="$polkit_dir/$POLKIT_RULE"
  if [ -f "$rule" ] && cmp -s "$here/polkit/$POLKIT_RULE" "$rule"; then
    say "polkit rule $rule is current"
  else
    say "installing the polkit rule $rule (workloads start as their owners' transient units)"
    [ -d "$polkit_dir" ] || run install -d -m 0755 "$polkit_dir"
    run install -m 0644 "$here/polkit/$POLKIT_RULE" "$rule"
  fi
  if [ -z "$prefix" ] && ! command -v pkcheck >/dev/null; then
    say "warning: polkit is not installed: workloads start only where the daemon may switch"
    say "  users itself; for workloads as their owners: apt-get install polkitd"
  fi
}

systemd_running() { [ -d /run/systemd/system ]; }

start_service() {
  if [ -n "$prefix" ] || [ "$start" = no ] || ! systemd_running; then
    local why="--no-start"
    [ -n "$prefix" ] && why="installed under --prefix $prefix"
    [ -z "$prefix" ] && [ "$start" = yes ] && why="systemd is not running here"
    say "not starting the daemon ($why). To start it on the server:"
    say "  systemctl daemon-reload && systemctl enable --now gpufleet-daemon"
    return 0
  fi
  run systemctl daemon-reload
  if systemctl is-active --quiet "$UNIT"; then
    # KillMode=process: workloads the daemon launched keep running.
    say "restarting the running daemon on the new version"
    run systemctl enable "$UNIT"
    run systemctl restart "$UNIT"
  else
    run systemctl enable --now "$UNIT"
  fi
  say "status: systemctl status gpufleet-daemon; logs: journalctl -u gpufleet-daemon"
}

main() {
  parse_args "$@"
  set_paths
  check_prerequisites "$@"
  [ "$dry_run" = no ] || say "dry run: nothing will be changed"
  create_service_user
  install_venv
  install_docs
  install_config
  check_config
  install_unit
  install_polkit_rule
  start_service
  if [ "$dry_run" = yes ]; then
    say "dry run done: nothing was changed"
  else
    say "done: $("$venv/bin/gpufleet" --version) in $venv"
  fi
}

main "$@"
