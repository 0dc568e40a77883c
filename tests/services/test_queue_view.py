"""The queue's requested shapes are read once per group, a chunk of groups at a time
(``services/queue_view.py``): a queue of thousands never reads every group's objects at once,
nor twice."""

from __future__ import annotations

from typing import Any

from corral.services.queue_view import _KnownShapes
from tests.scheduler.helpers import pod, pod_group


class CountingStore:
    def __init__(self) -> None:
        self.reads: list[int] = []

    def manifests(self, uuids: list[str]) -> dict[str, list[dict[str, Any]]]:
        self.reads.append(len(uuids))
        return {uuid: [pod_group(1), pod(f"{uuid}-0", gpu=8)] for uuid in uuids}


def test_shapes_are_read_in_chunks_and_once() -> None:
    known, store = _KnownShapes(), CountingStore()
    uuids = [f"g{i}" for i in range(1200)]
    first = known.of(store, uuids)  # type: ignore[arg-type]
    assert store.reads == [500, 500, 200]
    assert len(first) == 1200 and first["g7"].text == "1 x 8 GPUs"
    again = known.of(store, [*uuids[:10], "new"])  # type: ignore[arg-type]
    assert store.reads == [500, 500, 200, 1] and set(again) == {*uuids[:10], "new"}
