"""Desktop notifications for alerts: freedesktop notifications over D-Bus, and the tray."""
