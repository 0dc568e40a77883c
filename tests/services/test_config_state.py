"""ConfigService.state(): one typed snapshot per set of revisions."""

from __future__ import annotations

from pathlib import Path

from corral.domain.configs.types import ConfigType
from corral.services.config_service import WriteMeta
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
    real_read = store._read_current
    meta = WriteMeta(username="admin")

    def read_overlapping_a_write() -> object:
        found = real_read()  # the old heads...
        store._read_current = real_read
        service.patch(ConfigType.POOL, "default", {"description": "during"}, meta)
        return found  # ...stored after the write committed

    store._read_current = read_overlapping_a_write  # type: ignore[method-assign]
    store._writes += 1  # make the next state() read
    assert service.state().pool("default").description != "during"  # the overlapping read
    assert service.state().pool("default").description == "during"
    other = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}").configs
    other._store._monotonic = lambda: 0.0
    assert other.state().pool("default").description == "during"
    service.patch(ConfigType.POOL, "default", {"description": "later"}, meta)
    assert other.state().pool("default").description == "during"  # within its second
    assert other.state(fresh=True).pool("default").description == "later"
    runtime.engine.dispose()
