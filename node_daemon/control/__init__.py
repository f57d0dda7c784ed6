"""The daemon's hands: safe kill, reservations, the workload queue and its placement."""
