"""ConfigService.state(): one typed snapshot per set of revisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corral.domain.configs.types import ConfigType
from corral.services.config_writes import WriteMeta
from corral.services.runtime import open_runtime


def test_the_snapshot_is_kept_until_a_revision_changes(tmp_path: Path) -> None:
    runtime = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}")
    service = runtime.configs
    first = service.state()
    assert service.state() is first
    default = first.pool("default")
    meta = WriteMeta(username="admin")
    service.patch(ConfigType.POOL, "default", {"description": "changed"}, meta)
    second = service.state()
    assert second is not first
    assert second.pool("default").description == "changed"
    assert first.pool("default") is default  # the old value stays as it was
    assert service.state() is second
    runtime.engine.dispose()


def test_a_write_is_seen_at_once_even_by_a_read_that_overlapped_it(tmp_path: Path) -> None:
    """The heads are kept up to a second; a read that began before this server's write and
    ended after it must not keep the old heads for that second."""
    runtime = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}")
    service, store = runtime.configs, runtime.configs._store
    store._monotonic = lambda: 0.0  # nothing gets old by time in this test
    service.state()
    real_advance = store._advance
    meta = WriteMeta(username="admin")

    def read_overlapping_a_write(*args: Any) -> Any:
        found = real_advance(*args)  # the old items...
        store._advance = real_advance  # type: ignore[method-assign]
        service.patch(ConfigType.POOL, "default", {"description": "during"}, meta)
        return found  # ...answered after the write committed

    store._advance = read_overlapping_a_write  # type: ignore[method-assign]
    store._writes += 1  # make the next state() read
    service.state()  # the overlapping read
    assert service.state().pool("default").description == "during"
    other = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}").configs
    other._store._monotonic = lambda: 0.0
    assert other.state().pool("default").description == "during"
    service.patch(ConfigType.POOL, "default", {"description": "later"}, meta)
    assert other.state().pool("default").description == "during"  # within its second
    assert other.state(fresh=True).pool("default").description == "later"
    runtime.engine.dispose()


def test_a_write_keeps_the_models_of_every_item_it_did_not_change(tmp_path: Path) -> None:
    """With many pools, a write of one must not rebuild the others' models."""
    runtime = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}")
    service = runtime.configs
    meta = WriteMeta(username="admin")
    pool = {**service.item(ConfigType.POOL, "default")}
    pool.pop("name", None)
    service.put_document(ConfigType.POOL, {"pools": {"a": pool, "b": pool}}, meta)
    before = service.state()
    a, b = before.pool("a"), before.pool("b")
    service.patch(ConfigType.POOL, "a", {"description": "new"}, meta)
    after = service.state()
    assert after.pool("b") is b  # kept
    assert after.pool("a") is not a and after.pool("a").description == "new"
    assert after.referrers(ConfigType.POD_TEMPLATE, "default_user") == ["a", "b", "default"]
    runtime.engine.dispose()
