"""Cross-item rules: every name a config refers to must exist, and stay existing.

A write is checked where it can break something: the pools it writes, and the pools that name
an item it writes or deletes (:func:`touched_pools`), never every pool."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from corral.domain.configs.backend_models import TOPOLOGY_SCHEDULERS
from corral.domain.configs.snapshot import PLATFORM_LISTS, POOL_LISTS, Configs
from corral.domain.configs.types import ConfigType

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """A broken rule in ``ctype``/``name`` at ``path`` (relative to the item)."""

    ctype: ConfigType
    name: str
    path: Path
    message: str


#: What a pool's rendering reads besides the pool (the render check's inputs).
TEMPLATE_TYPES = (
    ConfigType.POD_TEMPLATE,
    ConfigType.GROUP_TEMPLATE,
    ConfigType.RESOURCE_VALIDATION,
)
Changes = Mapping[ConfigType, Iterable[str]]


def _references(pool: Mapping[str, Any]) -> Iterator[tuple[Path, ConfigType, str]]:
    """Every (path, referenced type, referenced name) in a pool."""
    yield ("backend",), ConfigType.BACKEND, pool["backend"]
    for field, ctype in POOL_LISTS:
        for index, name in enumerate(pool.get(field, [])):
            yield (field, index), ctype, name
    for platform_name, platform in pool.get("platforms", {}).items():
        for field, ctype in PLATFORM_LISTS:
            for index, name in enumerate(platform.get(field, [])):
                yield ("platforms", platform_name, field, index), ctype, name


def problems(configs: Configs, pool_names: Iterable[str] | None = None) -> Iterator[Problem]:
    """Every broken cross-reference in ``state`` (in the pools ``pool_names``, or all)."""
    pools: Mapping[str, Any] = configs.get(ConfigType.POOL, {})
    backends: Mapping[str, Any] = configs.get(ConfigType.BACKEND, {})
    names = pools if pool_names is None else [n for n in pool_names if n in pools]
    for pool_name in names:
        pool = pools[pool_name]
        for path, ctype, name in _references(pool):
            if name not in configs.get(ctype, {}):
                yield Problem(
                    ConfigType.POOL,
                    pool_name,
                    path,
                    f"{ctype.label} {name} does not exist! Create it first "
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


def touched_pools(
    before: Configs, after: Configs, changes: Changes, kinds: Iterable[ConfigType] | None = None
) -> list[str]:
    """The pools a write of ``changes`` can break: those it writes, and those that name (before
    or after) an item it writes of the types ``kinds`` (default: every type)."""
    wanted = set(ConfigType) if kinds is None else set(kinds)
    found = {name for name in changes.get(ConfigType.POOL, ()) if name in after.pool_names()}
    for ctype, names in changes.items():
        if ctype is ConfigType.POOL or ctype not in wanted or ctype.singleton:
            continue
        for name in names:
            found.update(after.referrers(ctype, name))
            found.update(p for p in before.referrers(ctype, name) if p in after.pool_names())
    return sorted(found)


def new_problems(before: Configs, after: Configs, changes: Changes) -> list[Problem]:
    """The broken references a write of ``changes`` makes (ones that were there before it do
    not count), looking only at the pools it touches."""
    pools = touched_pools(before, after, changes)
    known = set(problems(before, pools))
    return [problem for problem in problems(after, pools) if problem not in known]


def closure(configs: Configs, pool_names: Iterable[str]) -> Configs:
    """The part of ``state`` that pools ``pool_names`` are rendered from: those pools, every
    item they name, and the WORKFLOW config (what a sandbox worker needs to check or render
    them: not the thousands of other pools). A name of no pool is left out."""
    stored = configs[ConfigType.POOL]
    pools = {name: stored[name] for name in pool_names if name in stored}
    part: dict[ConfigType, Any] = {ctype: {} for ctype in ConfigType}
    part[ConfigType.POOL] = pools
    part[ConfigType.WORKFLOW] = configs.get(ConfigType.WORKFLOW)
    for name in pools:
        for ctype, used in configs.pool_references(name):
            stored = configs.get(ctype) or {}
            if used in stored:
                part[ctype][used] = stored[used]
    return Configs(part)


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
