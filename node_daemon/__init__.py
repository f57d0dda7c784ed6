"""gpufleet node daemon: samples the GPUs of one server and serves them over gRPC."""

from __future__ import annotations

import gpufleet  # noqa: F401  # first, before anything imports grpc: see gpufleet/__init__.py

__version__ = "0.1.0"
