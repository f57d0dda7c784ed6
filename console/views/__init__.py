"""Widgets: each takes its model in the constructor and renders it."""
