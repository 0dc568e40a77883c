"""Use cases: what the API and the server start-up do, in terms of the domain and the store."""
