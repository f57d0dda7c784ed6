"""`gpufleet status | ps | alerts | ack | silence | silences | unsilence | reserve | release |
kill | health | drain | undrain`: from a shell.

Plain gRPC and protobuf, no Qt: these commands run where no display is.
"""
