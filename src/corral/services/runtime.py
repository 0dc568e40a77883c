"""The composition root: one database, its stores and the services built on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, text

from corral.domain.defaults import initial_bundle
from corral.errors import UserError
from corral.files import read_bundle_directory
from corral.services.config_service import ConfigService, WriteMeta, WriteResult
from corral.store.config_store import ConfigStore
from corral.store.database import make_engine, migrate
from corral.store.tokens import TokenStore

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Runtime:
    engine: Engine
    configs: ConfigService
    tokens: TokenStore

    def database_ok(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception:
            return False
        return True


def open_runtime(database_url: str, clock: Clock = utc_now) -> Runtime:
    """Connect, migrate the schema, and record the initial configuration on first use."""
    engine = make_engine(database_url)
    migrate(engine)
    runtime = Runtime(engine, ConfigService(ConfigStore(engine, clock)), TokenStore(engine, clock))
    runtime.configs.initialize(initial_bundle())
    return runtime


def load_examples(runtime: Runtime, directory: Path) -> WriteResult:
    """Apply every config file of ``directory`` (not its subfolders) as one bundle."""
    bundle, _ = read_bundle_directory(directory)
    if not bundle:
        raise UserError(f"{directory} holds no config files")
    meta = WriteMeta(
        username="system",
        description="Load example configs (--demo)",
        tags=["examples"],
    )
    return runtime.configs.apply(bundle, meta, dry_run=False)
