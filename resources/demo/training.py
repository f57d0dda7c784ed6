"""A training job in miniature for `gpufleet demo`: a line of progress every few seconds,
until stopped (its name is its one argument)."""

import sys
import time

name = sys.argv[1] if len(sys.argv) > 1 else "training"
for step in range(1, 10**9):
    print(f"{name}: step {step} loss {2.5 / (1 + step / 40):.3f}", flush=True)
    time.sleep(5)
