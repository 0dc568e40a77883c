"""Two writers based on the same revision: exactly one wins, the other gets 409."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from corral.domain.configs.types import ConfigType
from corral.errors import ConflictError
from corral.services.config_writes import WriteMeta
from corral.services.runtime import Runtime, open_runtime

ROUNDS = 10


def _race(runtime: Runtime, base: int, round_number: int) -> list[str]:
    barrier = threading.Barrier(2)

    def writer(who: str) -> str:
        meta = WriteMeta(username=who, base_revision=base)
        barrier.wait()
        try:
            runtime.configs.put_item(
                ConfigType.POOL,
                f"pool-{who}-{round_number}",
                {"backend": "default", "description": who},
                meta,
            )
        except ConflictError:
            return "409"
        return "ok"

    with ThreadPoolExecutor(max_workers=2) as pool:
        return sorted(pool.map(writer, ["alice", "bob"]))


def test_exactly_one_of_two_concurrent_writers_wins(runtime: Runtime) -> None:
    for round_number in range(ROUNDS):
        _, base = runtime.configs.snapshot(ConfigType.POOL)
        assert _race(runtime, base, round_number) == ["409", "ok"]
        data, revision = runtime.configs.snapshot(ConfigType.POOL)
        assert revision == base + 1
        # The winner's pool is stored; the loser's is not (no lost update, no half write).
        created = {name for name in data if name.endswith(f"-{round_number}")}
        assert len(created) == 1


@pytest.mark.parametrize("writers", [8])
def test_unconditional_concurrent_writers_all_land(runtime: Runtime, writers: int) -> None:
    """Without a base revision, writes are serialized and none is lost."""
    barrier = threading.Barrier(writers)

    def writer(index: int) -> None:
        barrier.wait()
        runtime.configs.put_item(
            ConfigType.POOL, f"p{index}", {"backend": "default"}, WriteMeta(username=f"u{index}")
        )

    with ThreadPoolExecutor(max_workers=writers) as pool:
        list(pool.map(writer, range(writers)))
    data, revision = runtime.configs.snapshot(ConfigType.POOL)
    assert revision == 1 + writers
    assert {f"p{i}" for i in range(writers)} <= set(data)


def test_a_second_server_on_the_same_database_sees_every_write(
    runtime: Runtime, database_url: str
) -> None:
    """Cached snapshots are reused only while they are still the newest revision."""
    other = open_runtime(database_url)
    try:
        assert "shared" not in runtime.configs.snapshot(ConfigType.POOL)[0]  # fills the cache
        other.configs.put_item(
            ConfigType.POOL, "shared", {"backend": "default"}, WriteMeta(username="b")
        )
        data, revision = runtime.configs.snapshot(ConfigType.POOL)
        assert ("shared" in data, revision) == (True, 2)
        other.configs.delete_item(ConfigType.POOL, "shared", WriteMeta(username="b"))
        assert "shared" not in runtime.configs.snapshot(ConfigType.POOL)[0]
    finally:
        other.engine.dispose()


def test_concurrent_submissions_of_one_name_get_distinct_numbers(runtime: Runtime) -> None:
    """Six submissions of the same workflow at once: ids 1..6, each stored once."""
    from corral.services.submission import Mode, SubmitRequest, SubmittingUser

    text = "workflow:\n  name: race\n  tasks:\n  - {name: main, image: busybox, command: [sh]}\n"
    user = SubmittingUser("alice", is_admin=True, require=lambda action, resource: None)
    barrier = threading.Barrier(6)

    def submit(_: int) -> str:
        barrier.wait()
        request = SubmitRequest(pool="default", file=text)
        return runtime.submissions.submit(user, request, Mode.SUBMIT).workflow_id

    with ThreadPoolExecutor(max_workers=6) as pool:
        ids = sorted(pool.map(submit, range(6)))
    assert ids == [f"race-{n}" for n in range(1, 7)]
    stored = runtime.listings.list(users=["alice"])
    assert sorted(row["workflow_id"] for row in stored) == ids
