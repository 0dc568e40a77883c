"""Rendering a user's workflow template in a short-lived, resource-limited subprocess.

A workflow template is code written by any user; Jinja's sandbox blocks unsafe attribute access
but not ``{% for i in range(100000) %}{% for j in range(100000) %}``. So, as OSMO does, the server
renders in a child process (``python -m corral.services.jinja_worker``, never a shell) that
limits its own CPU time and address space, under a wall-clock timeout. The child speaks JSON:
``{"text", "variables", "cpu_seconds", "memory_bytes"}`` on stdin, ``{"text"}`` or
``{"error", "line", "column", "variable"}`` on stdout.
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from corral.domain.workflow_template import JinjaError, render_jinja

DEFAULT_TIMEOUT_SECONDS = 5.0
DEFAULT_CPU_SECONDS = 2
DEFAULT_MEMORY_BYTES = 512 * 2**20


def render_in_subprocess(
    text: str,
    variables: Mapping[str, Any],
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    cpu_seconds: int = DEFAULT_CPU_SECONDS,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> str:
    """Render ``text`` with ``variables`` in a child process; failures are :class:`JinjaError`."""
    payload = json.dumps(
        {
            "text": text,
            "variables": dict(variables),
            "cpu_seconds": cpu_seconds,
            "memory_bytes": memory_bytes,
        },
        default=str,
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "corral.services.jinja_worker"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise JinjaError(_too_slow(f"{timeout_seconds:g} s")) from None
    return _answer(done, cpu_seconds, memory_bytes)


def _answer(done: subprocess.CompletedProcess[str], cpu_seconds: int, memory_bytes: int) -> str:
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise JinjaError(_too_slow(f"{cpu_seconds} s of CPU time"))
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict):
        raise JinjaError(
            f"Jinja rendering of the workflow failed (the renderer exited with code "
            f"{done.returncode}, probably over its limit of {memory_bytes // 2**20} MiB of "
            "memory); simplify the template."
        )
    if "error" in answer:
        raise JinjaError(
            str(answer["error"]),
            line=answer.get("line"),
            column=answer.get("column"),
            variable=answer.get("variable"),
        )
    return str(answer["text"])


def _too_slow(limit: str) -> str:
    return f"Jinja rendering of the workflow took longer than {limit}; simplify the template"


# ---------------------------------------------------------------------------------- child


def _limit(cpu_seconds: int, memory_bytes: int) -> None:
    _lower(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    _lower(resource.RLIMIT_AS, memory_bytes, memory_bytes)


def _lower(kind: int, soft: int, hard: int) -> None:
    """Lower a limit of this process (never above what it already is)."""
    _, current = resource.getrlimit(kind)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(kind, (soft, hard))


def _render(payload: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return {"text": render_jinja(str(payload["text"]), payload["variables"])}
    except JinjaError as err:
        return {
            "error": err.reason,
            "line": err.line,
            "column": err.column,
            "variable": err.variable,
        }
    except MemoryError:
        limit = int(payload["memory_bytes"]) // 2**20
        return {
            "error": f"Jinja rendering of the workflow needed more than {limit} MiB of memory; "
            "simplify the template"
        }


def main() -> None:
    payload = json.loads(sys.stdin.read())
    _limit(int(payload["cpu_seconds"]), int(payload["memory_bytes"]))
    answer = _render(payload)
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
