"""ConfigService.state(): one typed snapshot per set of revisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral.cli.server_cmd import examples_directory
from corral.domain.configs.types import ConfigType
from corral.errors import UserError
from corral.services import config_service
from corral.services.config_writes import WriteMeta
from corral.services.runtime import load_examples, open_runtime
from corral.services.workers import sandbox


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


def test_a_write_of_many_pools_renders_them_in_bounded_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle of 5,000 pools went to one sandbox worker, over its 100 MiB: the apply failed.
    Each worker now renders at most POOLS_PER_WORKER pools, and a problem in the last batch is
    still found."""
    runtime = open_runtime(f"sqlite:///{tmp_path / 'corral.db'}")
    load_examples(runtime, examples_directory())
    batches: list[int] = []
    real_run = sandbox.run

    def counting_run(workflow: Any, what: str, function: Any, before: Any, after: Any) -> Any:
        batches.append(len(after.pool_names()))
        return real_run(workflow, what, function, before, after)

    monkeypatch.setattr(sandbox, "run", counting_run)
    template = {**runtime.configs.item(ConfigType.POOL, "default")}
    template.pop("name", None)
    pools = {f"p{i:03}": template for i in range(2 * config_service.POOLS_PER_WORKER + 1)}
    broken = {**template, "common_default_variables": {"USER_GPU": "many"}}
    pools[f"p{len(pools) - 1:03}"] = broken
    with pytest.raises(UserError) as caught:
        runtime.configs.apply({"pools": pools}, WriteMeta(username="admin"), dry_run=True)
    assert caught.value.field == f"pools.p{len(pools) - 1:03}.platforms.default"
    assert batches == [config_service.POOLS_PER_WORKER] * 2 + [1]
    runtime.engine.dispose()
