"""Reports: audit, usage, inventory."""
