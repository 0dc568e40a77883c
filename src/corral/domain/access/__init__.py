"""Who may do what: OSMO's action registry (path + method -> action) and role policies."""
