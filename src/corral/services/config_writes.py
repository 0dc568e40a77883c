"""What a config write changes (``config_service.py`` makes and commits it): per type, the
items it sets or deletes and where each sat in the request; the items that really change; the
revisions recorded; what each item's change was; where an error points."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.domain.configs import references
from corral.domain.configs.bundles import ParsedBundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.formats.diff import changes
from corral.errors import UserError
from corral.store.config_item_versions import Heads
from corral.store.config_store import NewRevision, Revision

Path = tuple[str | int, ...]
Located = Mapping[str, Path]
#: The item name under which a singleton type (WORKFLOW) is stored.
SINGLETON = ""


@dataclass(frozen=True)
class WriteMeta:
    """Who writes, why, and (optionally) which revision the write was based on."""

    username: str
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    base_revision: int | None = None


@dataclass(frozen=True)
class ItemChange:
    config_type: ConfigType
    name: str
    action: str  # created | updated | deleted | unchanged
    changes: list[dict[str, Any]]


@dataclass(frozen=True)
class WriteResult:
    revisions: list[Revision]
    items: list[ItemChange]

    @property
    def changed(self) -> bool:
        return bool(self.revisions)


@dataclass
class Pending:
    """The items one type's write sets (None: deletes), plus where its submitted items sit in
    the request."""

    changes: dict[str, Any]
    description: str
    name: str = ""
    located: Located = field(default_factory=dict)


#: Computes, from the configuration seen inside the write transaction, what each type changes.
PendingFor = Callable[[Configs, Heads], dict[ConfigType, Pending]]


def effective_items(before: Configs, ctype: ConfigType, items: Mapping[str, Any]) -> dict[str, Any]:
    """The items of a write that change something: not those set to what they are, nor
    deletions of what is not there (the store records no more than these)."""
    if ctype.singleton:
        value = items.get(SINGLETON)
        return {SINGLETON: value} if value is not None and value != before[ctype] else {}
    current: Mapping[str, Any] = before[ctype]
    return {
        name: value
        for name, value in items.items()
        if ((name in current) if value is None else current.get(name) != value)
    }


def new_revisions(pending: Mapping[ConfigType, Pending], meta: WriteMeta) -> list[NewRevision]:
    return [
        NewRevision(
            config_type=ctype,
            changes=new.changes,
            name=new.name,
            username=meta.username,
            description=meta.description or new.description,
            tags=list(meta.tags),
        )
        for ctype, new in pending.items()
        if new.changes
    ]


def bundle_pending(parsed: ParsedBundle, description: str | None) -> PendingFor:
    def pending_for(before: Configs, heads: Heads) -> dict[ConfigType, Pending]:
        del before, heads
        pending: dict[ConfigType, Pending] = {}
        for ctype, items in parsed.items.items():
            pending[ctype] = Pending(
                dict(items),
                description or f"Apply bundle: {', '.join(items)}",
                located={name: (ctype.bundle_key or "", name) for name in items},
            )
        if parsed.workflow is not None:
            pending[ConfigType.WORKFLOW] = Pending(
                {SINGLETON: parsed.workflow},
                description or "Apply bundle: workflow config",
                located={SINGLETON: ("workflow",)},
            )
        return pending

    return pending_for


def located_error(problem: references.Problem, pending: Mapping[ConfigType, Pending]) -> UserError:
    """The error for ``problem``: at its place in the request when the request holds the item,
    else naming the item this change would break."""
    located = pending.get(problem.ctype)
    prefix = located.located.get(problem.name) if located else None
    if prefix is not None:
        return UserError(problem.message, path=(*prefix, *problem.path))
    return UserError(
        f"This change would break {problem.ctype.label.lower()} {problem.name} "
        f"({'.'.join(map(str, problem.path))}): {problem.message}"
    )


def item_changes(before: Configs, pending: Mapping[ConfigType, Pending]) -> list[ItemChange]:
    """Created, updated (with the field changes), deleted or unchanged: each item written."""
    found: list[ItemChange] = []
    for ctype, new in pending.items():
        if ctype.singleton:
            delta = changes(before[ctype], new.changes.get(SINGLETON, before[ctype]))
            action = "updated" if delta else "unchanged"
            found.append(ItemChange(ctype, "", action, [c.to_dict() for c in delta]))
            continue
        old: Mapping[str, Any] = before[ctype]
        for name, value in new.changes.items():
            if value is None:
                found.append(ItemChange(ctype, name, "deleted", []))
            elif name not in old:
                found.append(ItemChange(ctype, name, "created", []))
            else:
                delta = changes(old[name], value)
                action = "updated" if delta else "unchanged"
                found.append(ItemChange(ctype, name, action, [c.to_dict() for c in delta]))
    return found
