# shellcheck shell=bash
# Sourced by install.sh and install-console.sh: copy a checkout, minus build
# junk and environments, into a fresh temporary directory and print its path,
# so that building the wheel leaves nothing behind in the checkout.
stage_checkout() {
  local source_path="$1" staging
  staging="$(mktemp -d)"
  tar -C "$source_path" --exclude=./.git --exclude=./.venv --exclude=./.tools \
    --exclude=./build --exclude=./dist --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=./.pytest_cache --exclude=./.mypy_cache --exclude=./.ruff_cache \
    -cf - . | tar -C "$staging" -xf -
  printf '%s\n' "$staging"
}
