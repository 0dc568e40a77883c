"""Config use cases: read, write, patch, delete, history, diff, rollback, tags, bundles.

Every write goes through ``_commit``: inside the store's serialized write transaction it checks
the base revision (409 on a lost update), builds the new state of all types, validates every
cross-reference, and records one revision per changed type. So nothing half-valid is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.domain.configs import references
from corral.domain.configs.bundles import ParsedBundle, parse_bundle
from corral.domain.configs.snapshot import Configs, State, as_configs
from corral.domain.configs.types import (
    ConfigType,
    Item,
    parse_item,
    parse_items,
    parse_singleton,
)
from corral.domain.configs.workflow_models import WorkflowConfig
from corral.domain.formats.diff import changes
from corral.domain.formats.patch import strategic_merge
from corral.domain.platform.template_checks import affected_pools
from corral.errors import ConflictError, NotFoundError, UserError
from corral.services import sandbox
from corral.store.config_store import ConfigStore, Heads, HistoryQuery, NewRevision, Revision

Path = tuple[str | int, ...]
Located = Mapping[str, Path]


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
class _Pending:
    """The new snapshot of one type, plus where its submitted items sit in the request."""

    data: Any
    description: str
    name: str = ""
    located: Located = field(default_factory=dict)


#: Computes, from the heads seen inside the write transaction, the new snapshot of each type.
PendingFor = Callable[[Heads], dict[ConfigType, _Pending]]


def empty_snapshot(ctype: ConfigType) -> Any:
    return WorkflowConfig().model_dump(mode="json") if ctype.spec.singleton else {}


#: The problems a write from one state to another makes in the pools' rendered templates.
PoolCheck = Callable[[State, State], list[references.Problem]]


def sandboxed_pool_check(before: State, after: State) -> list[references.Problem]:
    """:func:`template_checks.new_pool_problems` in a sandbox worker (it renders templates),
    skipped when no pool's inputs changed."""
    if not affected_pools(before, after):
        return []
    found: list[references.Problem] = sandbox.run(
        "new_pool_problems",
        before,
        after,
        workflow_config=as_configs(after).workflow,
        what="Rendering the pools' templates",
    )
    return found


class ConfigService:
    def __init__(self, store: ConfigStore, check_pools: PoolCheck = sandboxed_pool_check) -> None:
        self._store = store
        self._check_pools = check_pools
        self._state: tuple[tuple[int, ...], Configs] | None = None

    # ------------------------------------------------------------------------------ reads

    def heads(self) -> list[Revision]:
        return sorted(self._store.heads().values(), key=lambda r: r.config_type.value)

    def snapshot(self, ctype: ConfigType) -> tuple[Any, int]:
        """Current data of ``ctype`` and its revision (0 if never written)."""
        head = self._store.head(ctype)
        return (head.data, head.revision) if head else (empty_snapshot(ctype), 0)

    def state(self, fresh: bool = False) -> Configs:
        """The current data of every type, with its typed views (one value per set of
        revisions, so each stored item is turned into its model once); at most a second old
        unless ``fresh`` (store/config_store.py)."""
        current = self._store.current_data(fresh)
        key = tuple(current.get(ctype, (0, None))[0] for ctype in ConfigType)
        cached = self._state
        if cached is None or cached[0] != key:
            data = {
                ctype: current[ctype][1] if ctype in current else empty_snapshot(ctype)
                for ctype in ConfigType
            }
            cached = self._state = (key, Configs(data))
        return cached[1]

    def item(self, ctype: ConfigType, name: str) -> Item:
        data, _ = self.snapshot(ctype)
        if name not in data:
            raise NotFoundError(f"{ctype.spec.label} {name} does not exist.")
        return data[name]

    def revision(self, ctype: ConfigType, revision: int) -> Revision:
        found = self._store.get(ctype, revision)
        if found is None or found.deleted_at is not None:
            raise NotFoundError(
                f"No config history entry found for type {ctype.value} at revision {revision}"
            )
        return found

    def history(self, query: HistoryQuery, *, with_data: bool = True) -> list[Revision]:
        return self._store.history(query, with_data=with_data)

    def diff(self, ctype: ConfigType, first: int | None, second: int | None) -> dict[str, Any]:
        """Data of two revisions (None = current) and the changes from the first to the second."""
        first_data = self._data_at(ctype, first)
        second_data = self._data_at(ctype, second)
        return {
            "first_data": first_data,
            "second_data": second_data,
            "changes": [c.to_dict() for c in changes(first_data, second_data)],
        }

    def _data_at(self, ctype: ConfigType, revision: int | None) -> Any:
        if revision is None:
            return self.snapshot(ctype)[0]
        return self.revision(ctype, revision).data

    # ----------------------------------------------------------------------------- writes

    def put_document(self, ctype: ConfigType, document: Any, meta: WriteMeta) -> WriteResult:
        """Upsert every item of a bulk document (WORKFLOW: replace the whole object)."""
        if ctype.spec.singleton:
            item = parse_singleton(ctype, document)
            return self._commit_one(ctype, lambda _: item, meta, f"Set {ctype.spec.label}", {})
        items, prefix = parse_items(ctype, document)
        if not items:
            raise UserError(f"the {ctype.value} document has no items")
        located = {name: (*prefix, name) for name in items}
        return self._commit_one(
            ctype,
            lambda current: {**current, **items},
            meta,
            f"Set {', '.join(items)} ({ctype.spec.label.lower()})",
            located,
        )

    def put_item(self, ctype: ConfigType, name: str, raw: Any, meta: WriteMeta) -> WriteResult:
        item = parse_item(ctype, name, raw)
        return self._commit_item(ctype, name, item, meta, "Put complete")

    def patch(
        self, ctype: ConfigType, name: str | None, patch: Any, meta: WriteMeta
    ) -> WriteResult:
        """Apply OSMO's strategic merge patch to one item (or to WORKFLOW) and validate."""
        if not isinstance(patch, dict):
            raise UserError("a patch must be a JSON object")
        if ctype.spec.singleton:
            current, _ = self.snapshot(ctype)
            merged = parse_singleton(ctype, strategic_merge(current, patch))
            return self._commit_one(ctype, lambda _: merged, meta, f"Patch {ctype.spec.label}", {})
        if name is None:
            raise UserError(f"name the {ctype.spec.label.lower()} to patch")
        merged = parse_item(ctype, name, strategic_merge(self.item(ctype, name), patch))
        return self._commit_item(ctype, name, merged, meta, "Patch")

    def delete_item(self, ctype: ConfigType, name: str, meta: WriteMeta) -> WriteResult:
        if ctype.spec.singleton:
            raise UserError(f"{ctype.value} cannot be deleted; update it instead")

        def without(current: dict[str, Any]) -> dict[str, Any]:
            if name not in current:
                raise NotFoundError(f"{ctype.spec.label} {name} does not exist.")
            return {key: value for key, value in current.items() if key != name}

        return self._commit_one(
            ctype,
            without,
            meta,
            f"Delete {ctype.spec.label.lower()} {name}",
            {},
            name=name,
            deleting=name,
        )

    def rollback(self, ctype: ConfigType, revision: int, meta: WriteMeta) -> WriteResult:
        """A new revision whose data equals ``revision``'s; items equal in both are untouched."""
        target = self._store.get(ctype, revision)
        if target is None:
            raise NotFoundError(
                f"No config history entry found for type {ctype.value} at revision {revision}"
            )
        if target.deleted_at is not None:
            raise UserError(
                f"Cannot roll back to revision {revision} for config type {ctype.value} as it "
                f"was deleted by {target.deleted_by}"
            )
        description = f"Roll back {ctype.value} to r{revision}"
        if target.description:
            description += f": {target.description}"
        located = {name: (name,) for name in target.data} if not ctype.spec.singleton else {}
        return self._commit_one(ctype, lambda _: target.data, meta, description, located)

    def apply(self, bundle: Any, meta: WriteMeta, *, dry_run: bool) -> WriteResult:
        """Upsert every item of a bundle atomically (one revision per changed type)."""
        parsed = parse_bundle(bundle)
        pending_for = _bundle_pending(parsed, meta.description)
        if dry_run:
            heads = self._store.heads()
            return WriteResult([], _item_changes(heads, self._build(heads, pending_for)))
        return self._commit(pending_for, meta)

    def initialize(self, bundle: Any) -> bool:
        """Record the initial configuration if nothing was ever written; True if it did."""
        parsed = parse_bundle(bundle)
        meta = WriteMeta(
            username="system", description="Initial configuration", tags=["initial-config"]
        )

        def plan(heads: Heads) -> list[NewRevision]:
            if heads:
                return []
            return self._new_revisions(
                heads, self._build(heads, _bundle_pending(parsed, None)), meta
            )

        return bool(self._store.write(plan))

    # ------------------------------------------------------------------------------ tags

    def tag(
        self,
        ctype: ConfigType,
        revision: int | None,
        set_tags: list[str],
        delete_tags: list[str],
    ) -> Revision:
        if not set_tags and not delete_tags:
            raise UserError("give tags to set or to delete")
        target = self.revision(ctype, revision or self.snapshot(ctype)[1])
        tags = [t for t in target.tags if t not in delete_tags]
        tags += [t for t in set_tags if t not in tags]
        self._store.set_tags(ctype, target.revision, tags)
        return self.revision(ctype, target.revision)

    def delete_revision(self, ctype: ConfigType, revision: int, username: str) -> None:
        target = self.revision(ctype, revision)
        if target.revision == self.snapshot(ctype)[1]:
            raise UserError(
                f"Cannot delete the current revision {revision} for config type {ctype.value}"
            )
        self._store.set_deleted(ctype, revision, username)

    # --------------------------------------------------------------------------- commits

    def _commit_item(
        self, ctype: ConfigType, name: str, item: Item, meta: WriteMeta, verb: str
    ) -> WriteResult:
        """Store ``item`` (already parsed) as ``name``; errors point into the item itself."""
        return self._commit_one(
            ctype,
            lambda current: {**current, name: item},
            meta,
            f"{verb} {ctype.spec.label.lower()} {name}",
            {name: ()},
            name=name,
        )

    def _commit_one(
        self,
        ctype: ConfigType,
        change: Callable[[Any], Any],
        meta: WriteMeta,
        description: str,
        located: Located,
        *,
        name: str = "",
        deleting: str | None = None,
    ) -> WriteResult:
        """Commit ``change(current data of ctype)`` as the new snapshot of ``ctype``."""

        def pending_for(heads: Heads) -> dict[ConfigType, _Pending]:
            head = heads.get(ctype)
            if meta.base_revision is not None:
                current = head.revision if head else 0
                if meta.base_revision != current:
                    raise ConflictError(
                        f"{ctype.value} changed since revision {meta.base_revision}: it is now "
                        f"at revision {current}. Fetch it again and re-apply your change."
                    )
            if deleting is not None:
                _refuse_if_referenced(heads, ctype, deleting)
            current_data = head.data if head else empty_snapshot(ctype)
            return {ctype: _Pending(change(current_data), description, name, located)}

        return self._commit(pending_for, meta)

    def _commit(self, pending_for: PendingFor, meta: WriteMeta) -> WriteResult:
        items: list[ItemChange] = []

        def plan(heads: Heads) -> list[NewRevision]:
            pending = self._build(heads, pending_for)
            items.extend(_item_changes(heads, pending))
            return self._new_revisions(heads, pending, meta)

        revisions = self._store.write(plan)
        return WriteResult(revisions, items)

    def _build(self, heads: Heads, pending_for: PendingFor) -> dict[ConfigType, _Pending]:
        """The new snapshots, validated against everything else that will be stored, and
        every pool they touch rendered with its defaults (docs/templates.md#checked-on-write)."""
        pending = pending_for(heads)
        _validate(heads, pending)
        before = {ctype: head.data for ctype, head in heads.items()}
        for problem in self._check_pools(before, _state(heads, pending)):
            raise _located(problem, pending)
        return pending

    @staticmethod
    def _new_revisions(
        heads: Heads, pending: dict[ConfigType, _Pending], meta: WriteMeta
    ) -> list[NewRevision]:
        revisions = []
        for ctype, new in pending.items():
            head = heads.get(ctype)
            if head is not None and head.data == new.data:
                continue  # nothing changed: no revision
            revisions.append(
                NewRevision(
                    config_type=ctype,
                    data=new.data,
                    name=new.name,
                    username=meta.username,
                    description=meta.description or new.description,
                    tags=list(meta.tags),
                )
            )
        return revisions


def _bundle_pending(parsed: ParsedBundle, description: str | None) -> PendingFor:
    def pending_for(heads: Heads) -> dict[ConfigType, _Pending]:
        pending: dict[ConfigType, _Pending] = {}
        for ctype, items in parsed.items.items():
            head = heads.get(ctype)
            current = head.data if head else {}
            pending[ctype] = _Pending(
                {**current, **items},
                description or f"Apply bundle: {', '.join(items)}",
                located={name: (ctype.spec.bundle_key or "", name) for name in items},
            )
        if parsed.workflow is not None:
            pending[ConfigType.WORKFLOW] = _Pending(
                parsed.workflow,
                description or "Apply bundle: workflow config",
                located={"": ("workflow",)},
            )
        return pending

    return pending_for


def _state(heads: Heads, pending: Mapping[ConfigType, _Pending]) -> dict[ConfigType, Any]:
    state = {ctype: head.data for ctype, head in heads.items()}
    state.update({ctype: new.data for ctype, new in pending.items()})
    return state


def _validate(heads: Heads, pending: Mapping[ConfigType, _Pending]) -> None:
    """Raise on the first cross-reference this write breaks, located in the request if it can."""
    before = set(references.problems({ctype: head.data for ctype, head in heads.items()}))
    for problem in references.problems(_state(heads, pending)):
        if problem not in before:
            raise _located(problem, pending)


def _located(problem: references.Problem, pending: Mapping[ConfigType, _Pending]) -> UserError:
    """The error for ``problem``: at its place in the request when the request holds the item,
    else naming the item this change would break."""
    located = pending.get(problem.ctype)
    prefix = located.located.get(problem.name) if located else None
    if prefix is not None:
        return UserError(problem.message, path=(*prefix, *problem.path))
    return UserError(
        f"This change would break {problem.ctype.spec.label.lower()} {problem.name} "
        f"({'.'.join(map(str, problem.path))}): {problem.message}"
    )


def _refuse_if_referenced(heads: Heads, ctype: ConfigType, name: str) -> None:
    users = references.referrers({t: h.data for t, h in heads.items()}, ctype, name)
    if users:
        raise UserError(
            f"{ctype.spec.label} {name} is used in pools {', '.join(users)}; remove it from "
            "those pools first."
        )


def _item_changes(heads: Heads, pending: Mapping[ConfigType, _Pending]) -> list[ItemChange]:
    found: list[ItemChange] = []
    for ctype, new in pending.items():
        old = heads[ctype].data if ctype in heads else empty_snapshot(ctype)
        if ctype.spec.singleton:
            delta = changes(old, new.data)
            found.append(
                ItemChange(
                    ctype, "", "updated" if delta else "unchanged", [c.to_dict() for c in delta]
                )
            )
            continue
        for name in [*old, *(n for n in new.data if n not in old)]:
            if name not in new.data:
                found.append(ItemChange(ctype, name, "deleted", []))
            elif name not in old:
                found.append(ItemChange(ctype, name, "created", []))
            else:
                delta = changes(old[name], new.data[name])
                found.append(
                    ItemChange(
                        ctype,
                        name,
                        "updated" if delta else "unchanged",
                        [c.to_dict() for c in delta],
                    )
                )
    return found
