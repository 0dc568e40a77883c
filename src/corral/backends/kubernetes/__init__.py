"""The ``kubernetes`` backend: corral's stored manifests applied to a real cluster running the
KAI scheduler (docs/kubernetes.md)."""
