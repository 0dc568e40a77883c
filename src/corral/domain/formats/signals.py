"""The signals a pool may send a local task with the notice of its stop (docs/checkpoints.md):
those a training loop can catch (never SIGKILL or SIGSTOP, which cannot be)."""

from __future__ import annotations

NOTICE_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGHUP", "SIGINT", "SIGTERM")
