"""Incident replay: the time cursor under the grid, its strip and banner (part.py: ReplayPart)."""
