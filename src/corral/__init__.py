"""corral: an open, OSMO-compatible control plane for GPU clusters."""

__version__ = "0.1.0"
