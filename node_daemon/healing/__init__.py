"""Self-healing: what the daemon does about a fault, when its policy allows (docs/health.md)."""
