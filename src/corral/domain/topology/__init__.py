"""Topology requirements to a KAI PodGroup, and the per-pool KAI Queues and Topologies."""
