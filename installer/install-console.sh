#!/usr/bin/env bash
# Install (or upgrade) the gpufleet desktop console for the current user.
#
#   installer/install-console.sh --node gpu-node-01:50051 --node gpu-node-02:50051
#   installer/install-console.sh                      # upgrade; keeps console.toml
#   installer/install-console.sh --prefix /tmp/home   # into a throwaway home (tests)
#
# No root needed. It makes a virtual environment with gpufleet and its console
# extra (PySide6, pyqtgraph), because Debian 12 and Ubuntu 23.04+ refuse
# `pip install --user` into the system Python (PEP 668), and links
# ~/.local/bin/gpufleet to it; installs the launcher (gpufleet-console.desktop)
# and its icon; writes ~/.config/gpufleet/console.toml from --node flags when
# there is none.
set -euo pipefail

readonly script=install-console
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=script-common.sh
. "$here/script-common.sh"
# shellcheck source-path=SCRIPTDIR source=stage-checkout.sh
. "$here/stage-checkout.sh"
checkout="$(dirname "$here")"

prefix=""
source_path="$checkout"
python="${PYTHON:-python3}"
venv=""
nodes=()
dry_run=no

# Libraries PySide6 loads (a minimal Debian or Ubuntu desktop has most of them).
readonly QT_PACKAGES="libgl1 libegl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3
  libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-xinerama0
  libxcb-randr0 libxcb-render-util0 libxcb-image0 libxcb-xkb1"

usage() {
  cat <<EOF
usage: $0 [--node HOST:PORT]... [--venv DIR] [--prefix DIR] [--source DIR|WHEEL] [--python PYTHON] [--dry-run]

  --node HOST:PORT  a node daemon to watch, for a new console.toml (repeat for more)
  --venv DIR        where the virtual environment goes
                    (default: \$XDG_DATA_HOME/gpufleet/venv, i.e. ~/.local/share/gpufleet/venv)
  --prefix DIR      use DIR as the home directory (tests): everything goes below it
  --source PATH     the project checkout or a gpufleet wheel (default: $checkout)
  --python PYTHON   the Python (3.11 or newer) that makes the venv (default: python3)
  --dry-run         print what would be done; change nothing
EOF
}

parse_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --node) [ $# -ge 2 ] || die "--node needs HOST:PORT"; nodes+=("$2"); shift ;;
      --node=*) nodes+=("${1#*=}") ;;
      --venv) [ $# -ge 2 ] || die "--venv needs a directory"; venv="$2"; shift ;;
      --venv=*) venv="${1#*=}" ;;
      --source|--source=*|--python|--python=*) source_option "$@"; shift $((taken - 1)) ;;
      *) common_option "$@"; shift $((taken - 1)) ;;
    esac
    shift
  done
  local node
  for node in "${nodes[@]}"; do
    [[ "$node" == *?:[0-9]* ]] || die "--node $node is not HOST:PORT"
  done
}

# The XDG directories of the user, or of the throwaway home given by --prefix.
set_paths() {
  local home="${HOME:?HOME is not set}" data config
  if [ -n "$prefix" ]; then
    home="$(realpath -m "$prefix")"
    data="$home/.local/share"
    config="$home/.config"
  else
    data="${XDG_DATA_HOME:-$home/.local/share}"
    config="${XDG_CONFIG_HOME:-$home/.config}"
  fi
  venv="$(realpath -m "${venv:-$data/gpufleet/venv}")"
  bin_dir="$home/.local/bin"
  apps_dir="$data/applications"
  icons_dir="$data/icons/hicolor/scalable/apps"
  settings="$config/gpufleet/console.toml"
  [ ! -e "$source_path" ] || source_path="$(realpath "$source_path")"
}

check_prerequisites() {
  [ -f "$here/desktop/gpufleet-console.desktop" ] || die "run this from a gpufleet checkout"
  [ -e "$source_path" ] || die "--source $source_path does not exist"
  check_python "sudo "
}

install_venv() {
  install_gpufleet "[console]" "gpufleet with its console extra"
  run mkdir -p "$bin_dir"
  run ln -sfn "$venv/bin/gpufleet" "$bin_dir/gpufleet"
}

# PySide6 imports only when Qt's runtime libraries are there.
check_qt() {
  [ "$dry_run" = no ] || return 0
  if ! QT_QPA_PLATFORM=offscreen "$venv/bin/python" -c 'import PySide6.QtWidgets' 2>/dev/null; then
    say "WARNING: PySide6 cannot load Qt's libraries. On Debian/Ubuntu:"
    say "  sudo apt-get install $(echo "$QT_PACKAGES" | tr -s ' \n' ' ')"
  fi
}

# The launcher runs this venv's gpufleet by its full path: a desktop session's
# PATH often lacks ~/.local/bin.
install_launcher() {
  local desktop="$apps_dir/gpufleet-console.desktop" executable="$venv/bin/gpufleet"
  case "$executable" in
    *[\"\`\$\\%]*) die "the venv path $venv has characters a launcher cannot hold; use --venv" ;;
  esac
  say "installing the launcher $desktop and the icon"
  run install -D -m 0644 "$here/desktop/gpufleet-console.svg" "$icons_dir/gpufleet-console.svg"
  run mkdir -p "$apps_dir"
  if [ "$dry_run" = no ]; then
    write_launcher "$executable" <"$here/desktop/gpufleet-console.desktop" >"$desktop.tmp"
    chmod 0644 "$desktop.tmp"
    mv "$desktop.tmp" "$desktop"
  fi
  if command -v desktop-file-validate >/dev/null && [ "$dry_run" = no ]; then
    desktop-file-validate "$desktop" || die "the launcher $desktop does not validate"
  fi
  if command -v update-desktop-database >/dev/null; then
    run update-desktop-database -q "$apps_dir" || true
  fi
}

# The shipped entry with Exec= and TryExec= pointing at EXECUTABLE (Exec=
# quotes it, as the desktop entry spec asks for a path that may hold spaces).
write_launcher() {
  local executable="$1" line
  while IFS= read -r line; do
    case "$line" in
      "Exec=gpufleet "*) printf 'Exec="%s" %s\n' "$executable" "${line#Exec=gpufleet }" ;;
      "TryExec=gpufleet") printf 'TryExec=%s\n' "$executable" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}

install_settings() {
  if [ -e "$settings" ]; then
    say "keeping the existing $settings"
    return 0
  fi
  if [ ${#nodes[@]} -eq 0 ]; then
    say "WARNING: no $settings and no --node given: the launcher cannot open a"
    say "  console until the nodes are listed there (example: $here/config/console.toml)"
    return 0
  fi
  say "writing $settings with ${#nodes[*]} node(s)"
  run mkdir -p "$(dirname "$settings")"
  if [ "$dry_run" = no ]; then
    {
      printf '# gpufleet console settings, written by install-console.sh.\n'
      printf '# Read by gpufleet console; docs/operations.md explains it.\n'
      printf 'nodes = [\n'
      printf '    "%s",\n' "${nodes[@]}"
      printf ']\n'
    } >"$settings"
  fi
}

main() {
  parse_args "$@"
  set_paths
  check_prerequisites
  [ "$dry_run" = no ] || say "dry run: nothing will be changed"
  install_venv
  check_qt
  install_launcher
  install_settings
  if [ "$dry_run" = no ]; then
    say "done: $("$venv/bin/gpufleet" --version); start it from the menu (GPU Fleet Console)"
    say "  or run: $bin_dir/gpufleet console"
  fi
}

main "$@"
