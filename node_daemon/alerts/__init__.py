"""Alerts judged on the node: rules, the engine that applies them, and their records."""
