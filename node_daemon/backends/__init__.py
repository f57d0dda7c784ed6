"""GPU backends: one small interface, two implementations (NVML, simulated)."""
