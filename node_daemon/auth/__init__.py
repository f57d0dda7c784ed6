"""Who may do what: identities (tokens, client certificates), roles, the audit log."""
