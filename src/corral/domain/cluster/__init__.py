"""Cluster descriptions: nodes, the rack generator, Kubernetes NodeLists."""
