# shellcheck shell=bash
# Sourced by installer/install.sh (a server set up from a checkout) and by the
# Debian package's postinst (installer/deb/postinst, which ships this file as
# /opt/gpufleet/share/service-setup.sh): the steps both take on the server, so
# a packaged daemon and a scripted one get the same user, config and drop-ins.
#
# The caller defines say MESSAGE... and run COMMAND... (install.sh's run only
# prints with --dry-run; the postinst's runs).

readonly GF_SERVICE_USER=gpufleet
readonly GF_STATE_DIR=/var/lib/gpufleet

# The system user and group gpufleet (home /var/lib/gpufleet, no login), unless
# they exist. systemd creates the state directory itself (StateDirectory=).
gf_ensure_service_user() {
  if getent passwd "$GF_SERVICE_USER" >/dev/null; then
    say "user $GF_SERVICE_USER exists"
    return 0
  fi
  local nologin
  nologin="$(command -v nologin || echo /usr/sbin/nologin)"
  say "creating system user and group $GF_SERVICE_USER"
  run useradd --system --user-group --home-dir "$GF_STATE_DIR" --no-create-home \
    --shell "$nologin" --comment "gpufleet node daemon" "$GF_SERVICE_USER"
}

# EXAMPLE as CONFIG_DIR/daemon.toml, only if there is none: an operator's
# (or Ansible's) file is never replaced. With GROUP (and where it exists) the
# file is root:GROUP 0640, as tokens and keys may go in it; else 0644.
gf_install_default_config() {
  local example="$1" config_dir="$2" group="${3:-}" config="$2/daemon.toml"
  run install -d -m 0755 "$config_dir"
  if [ -e "$config" ]; then
    say "keeping the existing $config (the example is $example)"
    return 0
  fi
  say "installing the example configuration as $config"
  if [ -n "$group" ] && getent group "$group" >/dev/null; then
    run install -m 0640 -o root -g "$group" "$example" "$config"
  else
    run install -m 0644 "$example" "$config"
  fi
}

# The unit adds the video group for /dev/nvidia* set to 0660 root:video; a
# system without that group could not start it: a drop-in in DROPIN_DIR
# (/etc/systemd/system/gpufleet-daemon.service.d) removes it there.
gf_video_group_dropin() {
  local dropin_dir="$1"
  getent group video >/dev/null && return 0
  say "no group 'video' here: dropping SupplementaryGroups=video"
  run install -d -m 0755 "$dropin_dir"
  if [ "${dry_run:-no}" = no ]; then
    printf '# Written by the gpufleet installer: this system has no video group.\n[Service]\nSupplementaryGroups=\n' \
      >"$dropin_dir/10-no-video-group.conf"
  fi
}

# Load CONFIG with the daemon's own loader (PYTHON: the venv's), as it will at
# start: a bad file stops the caller before a restart takes a working daemon down.
gf_check_config() {
  local python="$1" config="$2"
  "$python" -c 'import sys; from pathlib import Path
from node_daemon.config import ConfigError, load_config_file
try:
    load_config_file(Path(sys.argv[1]))
except ConfigError as exc:
    sys.exit(f"gpufleet: error: {exc}")' "$config"
}
