"""The console's domain layer: fleet state in plain Python and numpy, no Qt."""
