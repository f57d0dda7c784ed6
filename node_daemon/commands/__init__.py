"""The `gpufleet` command line: the daemon itself and its admin subcommands."""
