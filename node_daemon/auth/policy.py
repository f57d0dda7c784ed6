"""Which calls the interceptor checks: the role each needs and which are audited (both
in gpufleet.policy, shared with the console), and the services left open."""

from __future__ import annotations

SERVICE = "/gpufleet.v1.NodeService/"
# Health checks and server reflection stay open: load balancers and tools need them.
OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


def method_name(full_method: str) -> str | None:
    """'/gpufleet.v1.NodeService/KillProcess' -> 'KillProcess'; None for other services."""
    return full_method.removeprefix(SERVICE) if full_method.startswith(SERVICE) else None


def is_open(full_method: str) -> bool:
    return full_method.startswith(OPEN_PREFIXES)
