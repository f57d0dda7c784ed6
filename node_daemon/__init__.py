"""gpufleet node daemon: samples the GPUs of one server and serves them over gRPC."""

from __future__ import annotations

__version__ = "0.1.0"
