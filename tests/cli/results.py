"""Checking the outcome of a `corral` run."""

from __future__ import annotations

import subprocess


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a run that must have succeeded (exit 0, no traceback)."""
    assert result.returncode == 0, f"{result.args}: {result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a run that must have failed: exit 1, nothing on stdout, no traceback."""
    assert result.returncode == 1, f"{result.args}: exit {result.returncode}: {result.stderr}"
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    return result.stderr.strip()
