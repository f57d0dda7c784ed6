"""gpufleet desktop console: watches every node daemon of a fleet."""
