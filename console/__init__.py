"""gpufleet desktop console: watches every node daemon of a fleet."""

import gpufleet  # noqa: F401  # first, before anything imports grpc: see gpufleet/__init__.py
