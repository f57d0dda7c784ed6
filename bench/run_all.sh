#!/usr/bin/env bash
# Run every benchmark in bench/ at its default size, or tiny with --smoke.
#
#   bench/run_all.sh            # full size (many minutes); each writes its results under bench/results/
#   bench/run_all.sh --smoke    # tiny sizes (seconds each): does everything still run?
#
# PYTHON picks the interpreter (default: .venv/bin/python if present, else python3).
# Every benchmark runs even when one fails; the exit status is 1 if any failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# The entry points; the other bench/*.py files are their parts.
benchmarks=(console_fleet console_frames inventory_churn console_growth alert_latency daemon_streams nvml_sweep fuzz_rpcs
            hostile_memory stream_starvation silent_node silent_node_notice popup_budget
            sweep_encode jwt_verify audit_denials fault_replay history_disk replay_fleet gil_handover)

smoke=()
case "${1:-}" in
    "") ;;
    --smoke) smoke=(--smoke) ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option $1 (--smoke or nothing)" >&2; exit 2 ;;
esac

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
cd "$root" || exit 2

failed=()
for name in "${benchmarks[@]}"; do
    script="$here/$name.py"
    if [[ ! -f "$script" ]]; then
        echo "== $name: $script not found, skipped" >&2
        continue
    fi
    echo "== $name ${smoke[*]}"
    "$PYTHON" "$script" "${smoke[@]}" || failed+=("$name")
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "== failed: ${failed[*]}" >&2
    exit 1
fi
echo "== all benchmarks ran"
