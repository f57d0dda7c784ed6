"""GPU health: signals judged into a state per GPU, with reasons (docs/health.md)."""
