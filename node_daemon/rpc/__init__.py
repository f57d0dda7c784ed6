"""The gRPC edge: one NodeService, its method table, servicers, guard and stream admission."""
