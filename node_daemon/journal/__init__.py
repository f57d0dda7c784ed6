"""The journal: the node's durable record of events, alerts, reservations and workloads."""
