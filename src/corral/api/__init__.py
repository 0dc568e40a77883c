"""HTTP API (FastAPI): OSMO's REST paths, bearer-token authentication."""
