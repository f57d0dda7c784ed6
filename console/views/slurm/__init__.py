"""Slurm: its jobs panel, prompts, reservations and the drain zone."""
