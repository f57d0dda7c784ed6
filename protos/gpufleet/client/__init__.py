"""One client for NodeService: the channel, the call table, two faces, one decoder.

- `calls`: every NodeService call (method, request, answer, deadline), the one table.
- `blocking.NodeClient`: the blocking face (the terminal, the daemon's own commands).
- `aio.AsyncNodeClient`: the async face (grpc.aio; the console's network thread).
- `channel`, `security`: how a node is dialled (options, TLS, the bearer token).
- `errors.CallError`: every failure, naming the node's address and the call.
- `words`: plain wire values (enum words, severities, optional fields, times).
- `workload_args`, `submit_command`: what a workload is on a command line, and the
  daemon-only `gpufleet submit`.

It imports only gRPC and the generated `gpufleet.v1` modules, never the daemon or
the console (import-linter contracts in pyproject.toml).
"""
