"""The window's looks and keys: themes, menus, wall mode, shortcuts."""
