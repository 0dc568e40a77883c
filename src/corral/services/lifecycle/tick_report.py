"""What one lifecycle tick did: the counts the controller logs and tests read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TickReport:
    """What one tick did, for logs and tests."""

    #: Workflows alive when the tick started, and how many of them it stepped.
    alive: int = 0
    stepped: int = 0
    created_groups: int = 0
    placed_groups: int = 0
    placed_pods: int = 0
    finished_tasks: int = 0
    cleaned_groups: int = 0
    finished_workflows: list[str] = field(default_factory=list)
    #: SQL statements the tick sent, how long it took, and how much of that went to
    #: collecting garbage.
    queries: int = 0
    seconds: float = 0.0
    gc_seconds: float = 0.0

    def log_fields(self) -> dict[str, Any]:
        """What the per-tick debug line says."""
        return {
            "seconds": round(self.seconds, 6),
            "gc_seconds": round(self.gc_seconds, 6),
            "alive": self.alive,
            "stepped": self.stepped,
            "created_groups": self.created_groups,
            "placed_groups": self.placed_groups,
            "placed_pods": self.placed_pods,
            "finished_tasks": self.finished_tasks,
            "cleaned_groups": self.cleaned_groups,
            "finished_workflows": len(self.finished_workflows),
            "queries": self.queries,
        }
