"""Backends: where the stored objects of a workflow become running work."""
