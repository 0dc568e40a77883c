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
