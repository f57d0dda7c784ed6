"""Errors shared across the daemon's modules."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration problem, worded for the operator: file, key, what is expected."""
