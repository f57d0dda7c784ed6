"""The GPU plots: axes, crosshair, thresholds, history, time range, export."""
