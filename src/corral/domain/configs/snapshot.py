"""The configuration as one immutable value: every type's stored JSON (what templates are
rendered from) and the validated models that readers use field by field.

Stored items were validated when written, so a reader never re-checks them: each model is built
once per :class:`Configs` value, and the config service keeps one value per set of revisions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from corral.domain.configs.backend_models import Backend
from corral.domain.configs.models import Pool, ResourceRule
from corral.domain.configs.role_models import Role
from corral.domain.configs.types import ConfigType
from corral.domain.configs.workflow_models import WorkflowConfig
from corral.errors import NotFoundError, UserError

#: Every type's stored data, as the store and the write checks hold it.
State = Mapping[ConfigType, Any]


class Configs(Mapping[ConfigType, Any]):
    """Read-only: the stored data of every type (a Mapping, as :data:`State`), plus typed views.

    Models are built on first use and kept (building one twice from the same data gives the same
    model, so two threads racing on the cache are harmless)."""

    def __init__(self, data: State) -> None:
        self._data: dict[ConfigType, Any] = dict(data)
        self._pools: dict[str, Pool] = {}
        self._backends: dict[str, Backend] = {}
        self._rules: dict[str, tuple[ResourceRule, ...]] = {}
        self._workflow: WorkflowConfig | None = None
        self._roles: tuple[Role, ...] | None = None

    # -- Mapping: the stored JSON ----------------------------------------------------------

    def __getitem__(self, ctype: ConfigType) -> Any:
        return self._data[ctype]

    def __iter__(self) -> Iterator[ConfigType]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # -- typed views -----------------------------------------------------------------------

    def pool_names(self) -> list[str]:
        return list(self._data.get(ConfigType.POOL) or {})

    def pool(self, name: str) -> Pool:
        """The pool ``name``; NotFoundError if there is none."""
        found = self._pools.get(name)
        if found is None:
            stored = (self._data.get(ConfigType.POOL) or {}).get(name)
            if stored is None:
                raise NotFoundError(f"Pool {name} not found.")
            found = self._pools[name] = Pool.model_validate(stored)
        return found

    def find_pool(self, name: str) -> Pool | None:
        """The pool ``name``, or None when it does not exist (any more)."""
        return self.pool(name) if name in self.pool_names() else None

    def pools(self) -> dict[str, Pool]:
        return {name: self.pool(name) for name in self.pool_names()}

    def backend(self, name: str) -> Backend:
        """The backend ``name``; an unconfigured name is the embedded cluster with defaults."""
        found = self._backends.get(name)
        if found is None:
            stored = (self._data.get(ConfigType.BACKEND) or {}).get(name) or {}
            found = self._backends[name] = Backend.model_validate(stored)
        return found

    def backend_names(self) -> list[str]:
        return list(self._data.get(ConfigType.BACKEND) or {})

    def rules(self, set_name: str) -> tuple[ResourceRule, ...]:
        """The rules of one RESOURCE_VALIDATION set; UserError if there is none."""
        found = self._rules.get(set_name)
        if found is None:
            stored = (self._data.get(ConfigType.RESOURCE_VALIDATION) or {}).get(set_name)
            if stored is None:
                raise UserError(f"Resource validation {set_name} does not exist!")
            found = tuple(ResourceRule.model_validate(rule) for rule in stored)
            self._rules[set_name] = found
        return found

    @property
    def workflow(self) -> WorkflowConfig:
        if self._workflow is None:
            self._workflow = WorkflowConfig.model_validate(
                self._data.get(ConfigType.WORKFLOW) or {}
            )
        return self._workflow

    @property
    def roles(self) -> tuple[Role, ...]:
        if self._roles is None:
            stored = self._data.get(ConfigType.ROLE) or {}
            self._roles = tuple(
                Role.model_validate({**body, "name": name}) for name, body in stored.items()
            )
        return self._roles


def as_configs(state: State) -> Configs:
    """``state`` with its typed views (the same value when it already has them)."""
    return state if isinstance(state, Configs) else Configs(state)
