"""Writers queue instead of failing (issue 13, item 8): on SQLite a transaction that reads and
then writes starts with ``BEGIN IMMEDIATE``, so 20 concurrent writers all get their turn."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from corral.backends.embedded.objects import ClusterObjectStore
from corral.services.runtime import utc_now
from corral.store.database import make_engine, migrate

WRITERS = 20
ROUNDS = 15


def pod(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"osmo.group_uuid": group}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_twenty_concurrent_read_then_write_transactions_all_succeed(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'corral.db'}")
    migrate(engine)
    store = ClusterObjectStore(engine, utc_now)
    failures: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def writer(number: int) -> None:
        start.wait()
        try:
            for round_ in range(ROUNDS):
                group = f"g{number}-{round_}"
                assert store.apply("default", pod(f"p{number}-{round_}", group), "default")
                labels = {"osmo.group_uuid": group}
                assert store.delete_collection("default", "v1", "Pod", "default", labels) == 1
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert [repr(f)[:200] for f in failures] == []
    assert store.all() == []
