"""Rendering a user's workflow template in a sandbox worker (``services/workers/sandbox.py``).

A workflow template is code written by any user; Jinja's sandbox blocks unsafe attribute access
but not ``{% for i in range(100000) %}{% for j in range(100000) %}``. So, as OSMO does, the
server renders it in a worker process limited in CPU time, address space and wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.domain.workflows.template import render_jinja
from corral.services.workers.sandbox import Limits, default_pool

DEFAULT_TIMEOUT_SECONDS = 5.0
DEFAULT_CPU_SECONDS = 2
DEFAULT_MEMORY_BYTES = 256 * 2**20
WHAT = "Jinja rendering of the workflow"


def render_in_subprocess(
    text: str,
    variables: Mapping[str, Any],
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    cpu_seconds: int = DEFAULT_CPU_SECONDS,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> str:
    """Render ``text`` with ``variables`` in a worker; failures are :class:`JinjaError` (or a
    UserError naming the limit that was hit)."""
    limits = Limits(
        cpu_seconds=cpu_seconds, wall_seconds=timeout_seconds, memory_bytes=memory_bytes
    )
    return default_pool().call(limits, WHAT, render_jinja, text, dict(variables))
