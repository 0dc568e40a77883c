"""The bounds on one connection (enforced by ``api/connections.py``; kept apart so that the
CLI names their defaults without importing the server stack)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    """``corral server --max-header-bytes --header-timeout --body-timeout
    --max-connections-per-client`` (docs/install.md#connection-limits)."""

    max_header_bytes: int = 64 * 2**10
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections_per_client: int = 64
