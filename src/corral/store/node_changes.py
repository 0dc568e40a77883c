"""Node health changed on a running server, audited (``node_changes``): one row per cordon,
uncordon, fail or heal. A node's current health is the ``after`` of its latest row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select

from corral.domain.formats.wire_time import as_utc
from corral.domain.platform.node_health import NodeHealth, health_from_json, health_json
from corral.store.database import writing
from corral.store.tables import node_changes


@dataclass(frozen=True)
class NodeChange:
    id: int
    backend: str
    node: str
    action: str
    by: str
    reason: str
    at: datetime
    before: NodeHealth
    after: NodeHealth


class NodeChangeStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock

    def record(
        self,
        backend: str,
        node: str,
        action: str,
        *,
        by: str,
        reason: str,
        before: NodeHealth,
        after: NodeHealth,
    ) -> NodeChange:
        """Write one change (its row is the audit and the node's new health)."""
        at = self._clock()
        row = {
            "backend": backend,
            "node": node,
            "action": action,
            "by": by,
            "reason": reason,
            "at": at,
            "before": health_json(before),
            "after": health_json(after),
        }
        with writing(self._engine) as connection:
            found = connection.execute(
                node_changes.insert().returning(node_changes.c.id), row
            ).scalar_one()
        return NodeChange(int(found), backend, node, action, by, reason, at, before, after)

    def marker(self) -> int:
        """Grows with every change: a reader compares it to know whether to read again."""
        with self._engine.connect() as connection:
            found = connection.execute(select(func.max(node_changes.c.id))).scalar()
        return int(found or 0)

    def current(self, backend: str) -> dict[str, NodeHealth]:
        """Per node of ``backend`` changed on a running server: its health now."""
        latest = (
            select(func.max(node_changes.c.id))
            .where(node_changes.c.backend == backend)
            .group_by(node_changes.c.node)
        )
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(node_changes.c.node, node_changes.c.after).where(
                    node_changes.c.id.in_(latest)
                )
            ).all()
        return {row.node: health_from_json(row.after) for row in rows}

    def history(self, backend: str, node: str, limit: int = 50) -> list[NodeChange]:
        """The node's changes, newest first."""
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(node_changes)
                .where(node_changes.c.backend == backend, node_changes.c.node == node)
                .order_by(node_changes.c.id.desc())
                .limit(limit)
            ).all()
        return [_change(row) for row in rows]


def _change(row: Any) -> NodeChange:
    return NodeChange(
        row.id,
        row.backend,
        row.node,
        row.action,
        row.by,
        row.reason,
        as_utc(row.at),
        health_from_json(row.before),
        health_from_json(row.after),
    )
