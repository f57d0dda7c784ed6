#!/usr/bin/env bash
# Regenerate the Python modules (and mypy stubs) of the gRPC contract.
# Output goes next to the .proto files: protos/gpufleet/v1/*_pb2*.py(i).
# Usage: protos/generate.sh [OUTPUT_ROOT]   (default: protos)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-protos}"
mkdir -p "$out"
python -m grpc_tools.protoc -I protos \
  --python_out="$out" --grpc_python_out="$out" \
  --mypy_out="$out" --mypy_grpc_out="$out" \
  protos/gpufleet/v1/*.proto
