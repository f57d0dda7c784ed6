"""gpufleet's wire: the generated messages (gpufleet.v1) and the one client (gpufleet.client)."""

import os

# gRPC's fork handlers restart its pollers in a forked child. A child that then
# closes its inherited descriptors before exec (subprocess with preexec_fn, user=
# or group=: a real fork, not vfork) leaves such a poller waiting on a closed epoll
# descriptor, and gRPC aborts the child: 3 of 1,000 such forks died of SIGABRT in
# a process with a live channel. Nothing here forks to use gRPC in the child, so the
# handlers stay off. gRPC reads this once, on its import: it must be set before any
# module imports grpc, which is why console and node_daemon import this package
# first. A value the environment already gives is kept.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
