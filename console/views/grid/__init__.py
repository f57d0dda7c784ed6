"""The fleet grid: tiles, their painting and colours, layout, keys, drops, search, the summary."""
