#!/usr/bin/env bash
# Lint and type-check, then the whole test suite, in the environment installer/dev-setup.sh made.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
venv="${VENV:-.venv}"
export QT_QPA_PLATFORM=offscreen
"$venv/bin/ruff" check . || exit 1
"$venv/bin/ruff" format --check . || exit 1
# Types are part of the check: a catalogue metric read with the wrong kind fails here.
"$venv/bin/mypy" node_daemon console || exit 1
# Two workers (GPUFLEET_TEST_WORKERS=0: none, all in this process): the suite mostly
# waits on daemons, X servers and containers. tests/workers.py keeps a file's tests, and
# the files on one session-wide resource (the Slurm cluster, the built packages), on
# one worker.
# A worker that crashes fails the run, named (its test and the rest of its file): a
# replacement worker left xdist's scope scheduling waiting for work forever.
"$venv/bin/pytest" -n "${GPUFLEET_TEST_WORKERS:-2}" --dist loadfile --max-worker-restart 0 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  # pytest's 5 means it collected nothing: for this suite that is a failure.
  echo "run-tests: pytest collected no tests; the suite is missing or filtered away" >&2
  exit 1
fi
exit "$rc"
