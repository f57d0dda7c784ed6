"""Sampling: each tick, read every GPU through the backend, encode the batch once, keep history."""
