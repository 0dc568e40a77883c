"""Cross-item rules: every name a config refers to must exist, and stay existing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from corral.domain.configs.backend_models import TOPOLOGY_SCHEDULERS
from corral.domain.configs.snapshot import State
from corral.domain.configs.types import ConfigType

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """A broken rule in ``ctype``/``name`` at ``path`` (relative to the item)."""

    ctype: ConfigType
    name: str
    path: Path
    message: str


# (referring list inside a pool, referenced type); platform lists are handled per platform.
_POOL_LISTS = (
    ("common_pod_template", ConfigType.POD_TEMPLATE),
    ("common_resource_validations", ConfigType.RESOURCE_VALIDATION),
    ("common_group_templates", ConfigType.GROUP_TEMPLATE),
)
_PLATFORM_LISTS = (
    ("override_pod_template", ConfigType.POD_TEMPLATE),
    ("resource_validations", ConfigType.RESOURCE_VALIDATION),
)


def _references(pool: Mapping[str, Any]) -> Iterator[tuple[Path, ConfigType, str]]:
    """Every (path, referenced type, referenced name) in a pool."""
    yield ("backend",), ConfigType.BACKEND, pool["backend"]
    for field, ctype in _POOL_LISTS:
        for index, name in enumerate(pool.get(field, [])):
            yield (field, index), ctype, name
    for platform_name, platform in pool.get("platforms", {}).items():
        for field, ctype in _PLATFORM_LISTS:
            for index, name in enumerate(platform.get(field, [])):
                yield ("platforms", platform_name, field, index), ctype, name


def problems(state: State) -> Iterator[Problem]:
    """Every broken cross-reference in ``state``."""
    pools: Mapping[str, Any] = state.get(ConfigType.POOL, {})
    backends: Mapping[str, Any] = state.get(ConfigType.BACKEND, {})
    for pool_name, pool in pools.items():
        for path, ctype, name in _references(pool):
            if name not in state.get(ctype, {}):
                yield Problem(
                    ConfigType.POOL,
                    pool_name,
                    path,
                    f"{ctype.spec.label} {name} does not exist! Create it first "
                    f"(corral config update {ctype.value} {name} --file ...) or fix the name.",
                )
        backend = backends.get(pool["backend"])
        if pool.get("topology_keys") and backend is not None:
            scheduler = backend["scheduler_settings"]["scheduler_type"]
            if scheduler not in TOPOLOGY_SCHEDULERS:
                yield Problem(
                    ConfigType.POOL,
                    pool_name,
                    ("topology_keys",),
                    f'Topology keys cannot be set for pool "{pool_name}" because backend '
                    f'"{pool["backend"]}" uses scheduler "{scheduler}" which does not support '
                    "topology constraints",
                )


def referrers(state: State, ctype: ConfigType, name: str) -> list[str]:
    """Names of the pools that refer to item ``name`` of ``ctype`` (sorted)."""
    pools: Mapping[str, Any] = state.get(ConfigType.POOL, {})
    return sorted(
        pool_name
        for pool_name, pool in pools.items()
        if any(kind is ctype and ref == name for _, kind, ref in _references(pool))
    )


#: How a pool gets a platform (said when a pool has none: on write, and at submission).
NO_PLATFORM_FIX = (
    "give the pool a platforms entry (for example platforms: {default: {}}) and set "
    "default_platform to it (docs/configs/pool.md)."
)


def pool_warnings(pools: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    """What is allowed in the pools ``names`` but will stop every submission to them."""
    return [
        f"Pool {name} has no platforms: every submission to it will fail until it has one; "
        f"{NO_PLATFORM_FIX}"
        for name in names
        if name in pools and not pools[name].get("platforms")
    ]
