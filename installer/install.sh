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
readonly script=install
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=script-common.sh
. "$here/script-common.sh"
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

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --source|--source=*|--python|--python=*) source_option "$@"; shift $((taken - 1)) ;;
      --no-users) manage_users=no ;;
      --no-start) start=no ;;
      *) common_option "$@"; shift $((taken - 1)) ;;
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
  check_python ""
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

install_venv() {
  install_gpufleet "" "gpufleet (daemon only, no Qt)"
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
