"""Read-only views over configs, nodes and workflows: pool quota, resource listing, explain."""
