"""Connections to node daemons, off the GUI thread. No Qt here."""
