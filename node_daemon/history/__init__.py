"""On-disk tiered metric history: raw ticks for an hour, downsampled tiers for longer."""
