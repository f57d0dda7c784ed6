"""`gpufleet status | ps | alerts | ack | silence | reserve | release | kill`: from a shell.

Plain gRPC and protobuf, no Qt: these commands run where no display is.
"""
