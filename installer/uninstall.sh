#!/usr/bin/env bash
# Remove the gpufleet node daemon that installer/install.sh installed.
#
#   sudo installer/uninstall.sh           # stop and disable the unit, remove it and the venv
#   sudo installer/uninstall.sh --purge   # also the configuration, the journal and the user
#   installer/uninstall.sh --prefix DIR   # from a throwaway root (tests)
#
# Workloads keep running: each is a transient unit of its own
# (gpufleet-workload-*.service), which this script lists.
# Without --purge, /etc/gpufleet (configuration, unit drop-ins) and
# /var/lib/gpufleet (the event journal) stay, so a reinstall carries on where
# this one stopped.
set -euo pipefail

readonly UNIT=gpufleet-daemon.service
readonly SERVICE_USER=gpufleet
readonly POLKIT_RULE=etc/polkit-1/rules.d/50-gpufleet-workloads.rules
readonly WORKLOAD_UNITS='gpufleet-workload-*.service'
readonly script=uninstall
# shellcheck source-path=SCRIPTDIR source=script-common.sh
. "$(cd "$(dirname "$0")" && pwd)/script-common.sh"

prefix=""
purge=no
dry_run=no

usage() {
  cat <<EOF
usage: $0 [--prefix DIR] [--purge] [--dry-run]

  --prefix DIR  remove from under DIR instead of / (systemd and users untouched)
  --purge       also remove /etc/gpufleet, /var/lib/gpufleet (the event journal:
                back it up first, see docs/operations.md) and the gpufleet user
  --dry-run     print what would be done; change nothing
EOF
}

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --purge) purge=yes ;;
      *) common_option "$@"; shift $((taken - 1)) ;;
    esac
    shift
  done
  [ -z "$prefix" ] || prefix="$(realpath -m "$prefix")"
  [ "$prefix" != / ] || prefix=""
  if [ -z "$prefix" ] && [ "$(id -u)" != 0 ] && [ "$dry_run" = no ]; then
    die "removing from / needs root: sudo $0 $*"
  fi
}

# Remove a path if it exists, saying so.
remove() {
  if [ -e "$1" ] || [ -L "$1" ]; then
    say "removing $1"
    run rm -rf -- "$1"
  fi
}

stop_service() {
  if [ -n "$prefix" ] || [ ! -d /run/systemd/system ]; then
    return 0
  fi
  if systemctl cat "$UNIT" >/dev/null 2>&1; then
    # KillMode=process: this stops the daemon only. Workloads it launched keep
    # running; `systemctl status gpufleet-daemon` lists any that are left.
    say "stopping and disabling $UNIT"
    run systemctl disable --now "$UNIT"
  fi
  report_leftovers
}

# Processes of the service user outlive the daemon: that is KillMode=process.
# Workloads started as transient units outlive it too: they are not its children.
report_leftovers() {
  local pids units
  pids="$(pgrep -u "$SERVICE_USER" 2>/dev/null | paste -sd ' ' || true)"
  if [ -n "$pids" ]; then
    say "still running as $SERVICE_USER (workloads the daemon launched): $pids"
    say "  see them: ps -o pid,etime,args -u $SERVICE_USER; end them: kill $pids"
  fi
  units="$(workload_units)"
  if [ -n "$units" ]; then
    say "workload units still running: $units"
    say "  see them: systemctl list-units '$WORKLOAD_UNITS'; end them: systemctl stop $units"
  fi
}

# The workloads' units that still run (or hold an unrecorded exit status).
workload_units() {
  [ -z "$prefix" ] && [ -d /run/systemd/system ] || return 0
  systemctl list-units --no-legend --plain --state=active,activating,deactivating \
    "$WORKLOAD_UNITS" 2>/dev/null | awk '{print $1}' | paste -sd ' ' || true
}

remove_files() {
  remove "$prefix/etc/systemd/system/$UNIT"
  remove "$prefix/etc/systemd/system/multi-user.target.wants/$UNIT"
  remove "$prefix/opt/gpufleet"
  remove "$prefix/$POLKIT_RULE"
  if [ -z "$prefix" ] && [ -d /run/systemd/system ]; then
    run systemctl daemon-reload
  fi
}

purge_state() {
  if [ "$purge" = no ]; then
    local kept="" path
    for path in "$prefix/etc/gpufleet" "$prefix/etc/systemd/system/$UNIT.d" "$prefix/var/lib/gpufleet"; do
      if [ -e "$path" ]; then kept="$kept $path"; fi
    done
    [ -z "$kept" ] || say "kept:$kept (--purge removes them)"
    return 0
  fi
  # Their working directories and output are in /var/lib/gpufleet.
  if [ -z "$prefix" ] && pgrep -u "$SERVICE_USER" >/dev/null 2>&1; then
    die "not purging while processes run as $SERVICE_USER (above); end them, then run $0 --purge again"
  fi
  if [ -n "$(workload_units)" ]; then
    die "not purging while workload units run (above): their output is in /var/lib/gpufleet; stop them, then run $0 --purge again"
  fi
  remove "$prefix/etc/systemd/system/$UNIT.d"
  remove "$prefix/etc/gpufleet"
  remove "$prefix/var/lib/gpufleet"
  [ -z "$prefix" ] || return 0
  if getent passwd "$SERVICE_USER" >/dev/null; then
    say "removing user $SERVICE_USER"
    run userdel "$SERVICE_USER"
  fi
  # userdel removes the user's own group only where USERGROUPS_ENAB is set.
  if getent group "$SERVICE_USER" >/dev/null; then
    say "removing group $SERVICE_USER"
    run groupdel "$SERVICE_USER"
  fi
}

main() {
  parse_args "$@"
  [ "$dry_run" = no ] || say "dry run: nothing will be changed"
  stop_service
  remove_files
  purge_state
  say "done"
}

main "$@"
