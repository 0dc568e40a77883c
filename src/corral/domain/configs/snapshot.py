"""The configuration as one immutable value: every type's stored JSON (what templates are
rendered from) and the validated models that readers use field by field.

Stored items were validated when written, so a reader never re-checks them: each model is built
once per :class:`Configs` value, and the config service keeps one value per set of revisions.
A value made from another one by a write (:meth:`Configs.with_changes`, or ``previous=``) keeps
the models of every item the write left alone: a pool written among 5,000 costs one model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

from corral.domain.configs.backend_models import Backend
from corral.domain.configs.models import Pool, ResourceRule
from corral.domain.configs.role_models import Role
from corral.domain.configs.types import ConfigType
from corral.domain.configs.workflow_models import WorkflowConfig
from corral.errors import NotFoundError, UserError

T = TypeVar("T")

#: A pool's references: (type, name) of every item it names.
References = frozenset[tuple[ConfigType, str]]

#: Which stored type each kind of model is built from; the "whole" kinds from all of it.
_KIND_TYPES = {
    "pool": ConfigType.POOL,
    "pools": ConfigType.POOL,
    "pools_by_backend": ConfigType.POOL,
    "refs": ConfigType.POOL,
    "backend": ConfigType.BACKEND,
    "rules": ConfigType.RESOURCE_VALIDATION,
    "workflow": ConfigType.WORKFLOW,
    "roles": ConfigType.ROLE,
}
_WHOLE_KINDS = ("workflow", "roles", "pools", "pools_by_backend")


class Configs(Mapping[ConfigType, Any]):
    """Read-only: the stored JSON of every type (a Mapping), plus typed views.

    Models are built on first use and kept. One value is shared by the server's threads and
    pickled into sandbox workers, so the caches change only under a lock."""

    def __init__(self, data: Mapping[ConfigType, Any], previous: Configs | None = None) -> None:
        self._data: dict[ConfigType, Any] = dict(data)
        self._models: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        if previous is not None:
            self._models = previous._models_of_unchanged(self._data)

    def with_changes(self, changes: Mapping[ConfigType, Mapping[str, Any]]) -> Configs:
        """This configuration with each named item replaced (None: removed), sharing the
        models of every other item. Singleton types (WORKFLOW) change whole: ``{"": new}``."""
        data = dict(self._data)
        for ctype, items in changes.items():
            if ctype.singleton:
                data[ctype] = items.get("", data.get(ctype))
                continue
            changed = dict(self._stored(ctype))
            for name, value in items.items():
                if value is None:
                    changed.pop(name, None)
                else:
                    changed[name] = value
            data[ctype] = changed
        return Configs(data, previous=self)

    def _models_of_unchanged(self, data: Mapping[ConfigType, Any]) -> dict[tuple[str, str], Any]:
        """The models of items that are the same objects in ``data`` as here."""
        with self._lock:
            models = dict(self._models)
        kept: dict[tuple[str, str], Any] = {}
        for (kind, name), model in models.items():
            ctype = _KIND_TYPES[kind]
            mine, theirs = self._data.get(ctype), data.get(ctype)
            if kind in _WHOLE_KINDS:
                same = mine is theirs
            else:
                same = mine is theirs or (
                    mine is not None
                    and theirs is not None
                    and name in mine
                    and mine.get(name) is theirs.get(name)
                )
            if same:
                kept[(kind, name)] = model
        return kept

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"_data": self._data, "_models": dict(self._models)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data, self._models = state["_data"], state["_models"]
        self._lock = threading.Lock()

    # -- Mapping: the stored JSON ----------------------------------------------------------

    def __getitem__(self, ctype: ConfigType) -> Any:
        return self._data[ctype]

    def __iter__(self) -> Iterator[ConfigType]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # -- typed views -----------------------------------------------------------------------

    def _model(self, kind: str, name: str, build: Callable[[], T]) -> T:
        """The model ``kind``/``name``, built by ``build`` the first time it is asked for."""
        key = (kind, name)
        with self._lock:
            if key in self._models:
                return cast(T, self._models[key])
        built = build()  # outside the lock: building is pure, and the first result is kept
        with self._lock:
            return cast(T, self._models.setdefault(key, built))

    def _stored(self, ctype: ConfigType) -> Mapping[str, Any]:
        found: Mapping[str, Any] = self._data.get(ctype) or {}
        return found

    def pool_names(self) -> list[str]:
        return list(self._stored(ConfigType.POOL))

    def pool(self, name: str) -> Pool:
        """The pool ``name``; NotFoundError if there is none."""
        stored = self._stored(ConfigType.POOL).get(name)
        if stored is None:
            raise NotFoundError(f"Pool {name} not found.")
        return self._model("pool", name, lambda: Pool.model_validate(stored))

    def find_pool(self, name: str) -> Pool | None:
        """The pool ``name``, or None when it does not exist (any more)."""
        return self.pool(name) if name in self._stored(ConfigType.POOL) else None

    def pools(self) -> dict[str, Pool]:
        """Every pool by name (a copy: built once per snapshot, as 5,000 pools took 35 ms)."""
        every: dict[str, Pool] = self._model(
            "pools", "", lambda: {name: self.pool(name) for name in self.pool_names()}
        )
        return dict(every)

    def pools_by_backend(self) -> dict[str, tuple[str, ...]]:
        """The names of the pools of each backend, in config order (built once per snapshot)."""

        def group() -> dict[str, tuple[str, ...]]:
            found: dict[str, list[str]] = {}
            for name, pool in self.pools().items():
                found.setdefault(pool.backend, []).append(name)
            return {backend: tuple(names) for backend, names in found.items()}

        grouped: dict[str, tuple[str, ...]] = self._model("pools_by_backend", "", group)
        return dict(grouped)

    def pool_references(self, name: str) -> References:
        """The (type, name) of every item pool ``name`` names (empty for no such pool)."""
        stored = self._stored(ConfigType.POOL).get(name)
        if stored is None:
            return frozenset()
        return self._model("refs", name, lambda: _references_of(stored))

    def referrers(self, ctype: ConfigType, name: str) -> list[str]:
        """The pools that name item ``name`` of ``ctype``, sorted."""
        wanted = (ctype, name)
        return sorted(p for p in self.pool_names() if wanted in self.pool_references(p))

    def backend(self, name: str) -> Backend:
        """The backend ``name``; an unconfigured name is the embedded cluster with defaults."""
        stored = self._stored(ConfigType.BACKEND).get(name) or {}
        return self._model("backend", name, lambda: Backend.model_validate(stored))

    def backend_names(self) -> list[str]:
        return list(self._stored(ConfigType.BACKEND))

    def rules(self, set_name: str) -> tuple[ResourceRule, ...]:
        """The rules of one RESOURCE_VALIDATION set; UserError if there is none."""
        stored = self._stored(ConfigType.RESOURCE_VALIDATION).get(set_name)
        if stored is None:
            raise UserError(f"Resource validation {set_name} does not exist!")
        return self._model(
            "rules", set_name, lambda: tuple(ResourceRule.model_validate(r) for r in stored)
        )

    @property
    def workflow(self) -> WorkflowConfig:
        stored = self._data.get(ConfigType.WORKFLOW) or {}
        return self._model("workflow", "", lambda: WorkflowConfig.model_validate(stored))

    @property
    def roles(self) -> tuple[Role, ...]:
        stored = self._stored(ConfigType.ROLE)
        return self._model(
            "roles",
            "",
            lambda: tuple(
                Role.model_validate({**body, "name": name}) for name, body in stored.items()
            ),
        )


#: Where a pool names other items: (field, type) in the pool, and in each platform.
POOL_LISTS = (
    ("common_pod_template", ConfigType.POD_TEMPLATE),
    ("common_resource_validations", ConfigType.RESOURCE_VALIDATION),
    ("common_group_templates", ConfigType.GROUP_TEMPLATE),
)
PLATFORM_LISTS = (
    ("override_pod_template", ConfigType.POD_TEMPLATE),
    ("resource_validations", ConfigType.RESOURCE_VALIDATION),
)


def _references_of(pool: Mapping[str, Any]) -> References:
    found = {(ConfigType.BACKEND, pool.get("backend", ""))}
    for field, ctype in POOL_LISTS:
        found.update((ctype, name) for name in pool.get(field) or [])
    for platform in (pool.get("platforms") or {}).values():
        for field, ctype in PLATFORM_LISTS:
            found.update((ctype, name) for name in platform.get(field) or [])
    return frozenset(found)
