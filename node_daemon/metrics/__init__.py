"""Prometheus /metrics: the dcgm-exporter family (same names, units, labels) and gpufleet_*."""
