"""Alerts: the alert panel and its menu, silences, the event log, toasts."""
