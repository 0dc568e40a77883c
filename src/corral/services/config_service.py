"""Config use cases: read, write, patch, delete, history, diff, rollback, tags, bundles.

Every write goes through ``_commit``: inside the store's serialized write transaction it checks
the base revision (409 on a lost update), works out the items it changes, checks what those
changes can break (the items themselves, and the pools that name them), and records one
revision per changed type holding only the changed items. So nothing half-valid is stored, and
a write costs what it changes, not what is stored (docs/architecture.md#config-storage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corral.domain.access.policies import admin_lockout
from corral.domain.configs import references
from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
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
from corral.domain.platform.template_checks import new_pool_problems
from corral.errors import ConflictError, NotFoundError, UserError
from corral.services.config_writes import (
    SINGLETON,
    ItemChange,
    Located,
    Pending,
    PendingFor,
    WriteMeta,
    WriteResult,
    bundle_pending,
    effective_items,
    item_changes,
    located_error,
    new_revisions,
)
from corral.services.workers import sandbox
from corral.store.config_item_versions import Current, Heads
from corral.store.config_store import ConfigStore, HistoryQuery, NewRevision, Revision


def empty_snapshot(ctype: ConfigType) -> Any:
    return WorkflowConfig().model_dump(mode="json") if ctype.singleton else {}


def type_data(ctype: ConfigType, items: Mapping[str, Any]) -> Any:
    """A type's config as readers know it: ``{name: item}``, or the WORKFLOW object."""
    if ctype.singleton:
        return items.get(SINGLETON, empty_snapshot(ctype))
    return items


#: Pools one sandbox worker renders at a time: 5,000 pools at once went over its memory limit.
POOLS_PER_WORKER = 250

#: The problems a write makes in the pools' rendered templates: (before, after, pools to check).
PoolCheck = Callable[[Configs, Configs, list[str]], list[references.Problem]]


def sandboxed_pool_check(
    before: Configs, after: Configs, pools: list[str]
) -> list[references.Problem]:
    """:func:`template_checks.new_pool_problems` in sandbox workers (it renders templates),
    for ``pools`` only: a worker gets :data:`POOLS_PER_WORKER` of them and what they name, so
    its memory is bounded however many pools one write changes."""
    problems: list[references.Problem] = []
    for start in range(0, len(pools), POOLS_PER_WORKER):
        batch = pools[start : start + POOLS_PER_WORKER]
        problems += sandbox.run(
            after.workflow,
            "Rendering the pools' templates",
            new_pool_problems,
            references.closure(before, batch),  # a pool the write adds is not in it
            references.closure(after, batch),
        )
    return problems


#: Every user's name and role names (who would lose the right to administer corral).
RoleHolders = Callable[[], Sequence[tuple[str, Sequence[str]]]]


class ConfigService:
    def __init__(
        self,
        store: ConfigStore,
        check_pools: PoolCheck = sandboxed_pool_check,
        role_holders: RoleHolders | None = None,
    ) -> None:
        self._store = store
        self._check_pools = check_pools
        #: None: no users to keep an admin among (a service without a user store).
        self._role_holders = role_holders
        self._state: tuple[tuple[int, ...], Configs] | None = None

    # ------------------------------------------------------------------------------ reads

    def heads(self) -> list[Revision]:
        """The newest revision of every type that has one (without data)."""
        return sorted(self._store.latest(), key=lambda r: r.config_type.value)

    def snapshot(self, ctype: ConfigType) -> tuple[Any, int]:
        """Current data of ``ctype`` and its revision (0 if never written)."""
        head = self._store.head(ctype)
        return (type_data(ctype, head.items), head.revision) if head else (empty_snapshot(ctype), 0)

    def state(self, fresh: bool = False) -> Configs:
        """The current data of every type, with its typed views (one value per set of
        revisions; a new one keeps the models of the items that did not change); at most a
        second old unless ``fresh`` (store/config_store.py)."""
        return self._configs_of(self._store.current(fresh))

    def _configs_of(self, heads: Heads) -> Configs:
        key = tuple(heads[ctype].revision if ctype in heads else 0 for ctype in ConfigType)
        cached = self._state
        if cached is not None and cached[0] == key:
            return cached[1]
        data = {
            ctype: type_data(ctype, heads[ctype].items) if ctype in heads else empty_snapshot(ctype)
            for ctype in ConfigType
        }
        made = Configs(data, previous=cached[1] if cached else None)
        if cached is None or cached[0] < key:  # never replace a newer value with an older one
            self._state = (key, made)
        return made

    def item(self, ctype: ConfigType, name: str) -> Item:
        data, _ = self.snapshot(ctype)
        if name not in data:
            raise NotFoundError(f"{ctype.label} {name} does not exist.")
        return data[name]

    def revision(self, ctype: ConfigType, revision: int) -> Revision:
        """One revision, with what it changed and the type's whole config at it."""
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
        found = self.revision(ctype, revision).data
        return type_data(ctype, found or {})

    # ----------------------------------------------------------------------------- writes

    def put_document(self, ctype: ConfigType, document: Any, meta: WriteMeta) -> WriteResult:
        """Upsert every item of a bulk document (WORKFLOW: replace the whole object)."""
        if ctype.singleton:
            item = parse_singleton(ctype, document)
            return self._commit_one(
                ctype, lambda _: {SINGLETON: item}, meta, f"Set {ctype.label}", {}
            )
        items, prefix = parse_items(ctype, document)
        if not items:
            raise UserError(f"the {ctype.value} document has no items")
        located = {name: (*prefix, name) for name in items}
        return self._commit_one(
            ctype,
            lambda _: dict(items),
            meta,
            f"Set {', '.join(items)} ({ctype.label.lower()})",
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
        if ctype.singleton:
            current, _ = self.snapshot(ctype)
            merged = parse_singleton(ctype, strategic_merge(current, patch))
            return self._commit_one(
                ctype, lambda _: {SINGLETON: merged}, meta, f"Patch {ctype.label}", {}
            )
        if name is None:
            raise UserError(f"name the {ctype.label.lower()} to patch")
        merged = parse_item(ctype, name, strategic_merge(self.item(ctype, name), patch))
        return self._commit_item(ctype, name, merged, meta, "Patch")

    def delete_item(self, ctype: ConfigType, name: str, meta: WriteMeta) -> WriteResult:
        if ctype.singleton:
            raise NotFoundError(
                f"{ctype.value} is one config, not a list of named items: it cannot be "
                f"deleted; update it at /api/configs/{ctype.url_segment}"
            )

        def without(current: Mapping[str, Any]) -> dict[str, Any]:
            if name not in current:
                raise NotFoundError(f"{ctype.label} {name} does not exist.")
            return {name: None}

        return self._commit_one(
            ctype,
            without,
            meta,
            f"Delete {ctype.label.lower()} {name}",
            {},
            name=name,
            deleting=name,
        )

    def rollback(self, ctype: ConfigType, revision: int, meta: WriteMeta) -> WriteResult:
        """A new revision after which the type's items equal ``revision``'s; items equal in
        both are untouched."""
        target = self._store.get(ctype, revision)
        if target is None:
            raise NotFoundError(
                f"No config history entry found for type {ctype.value} at revision {revision}"
            )
        if target.deleted_at is not None:
            raise ConflictError(
                f"Cannot roll back to revision {revision} for config type {ctype.value} as it "
                f"was deleted by {target.deleted_by}"
            )
        description = f"Roll back {ctype.value} to r{revision}"
        if target.description:
            description += f": {target.description}"
        wanted = dict(target.data or {})
        located = {name: (name,) for name in wanted} if not ctype.singleton else {}

        def back(current: Mapping[str, Any]) -> dict[str, Any]:
            gone = {name: None for name in current if name not in wanted}
            return {**gone, **wanted}

        try:
            return self._commit_one(ctype, back, meta, description, located)
        except UserError as err:  # the revision is fine; today's configs conflict with it
            raise ConflictError(
                f"Cannot roll back {ctype.value} to r{revision}: {err.to_dict()['message']}"
            ) from None

    def apply(self, bundle: Any, meta: WriteMeta, *, dry_run: bool) -> WriteResult:
        """Upsert every item of a bundle atomically (one revision per changed type)."""
        parsed = parse_bundle(bundle)
        pending_for = bundle_pending(parsed, meta.description)
        if dry_run:
            heads = self._store.current(fresh=True)
            before = self._configs_of(heads)
            return WriteResult([], item_changes(before, self._build(before, heads, pending_for)))
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
            before = self._configs_of(heads)
            pending = self._build(before, heads, bundle_pending(parsed, None))
            return new_revisions(pending, meta)

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
            raise ConflictError(
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
            lambda _: {name: item},
            meta,
            f"{verb} {ctype.label.lower()} {name}",
            {name: ()},
            name=name,
        )

    def _commit_one(
        self,
        ctype: ConfigType,
        change: Callable[[Mapping[str, Any]], dict[str, Any]],
        meta: WriteMeta,
        description: str,
        located: Located,
        *,
        name: str = "",
        deleting: str | None = None,
    ) -> WriteResult:
        """Commit the items ``change(current items of ctype)`` returns (None: delete)."""

        def pending_for(before: Configs, heads: Heads) -> dict[ConfigType, Pending]:
            head = heads.get(ctype, Current(0, {}))
            if meta.base_revision is not None and meta.base_revision != head.revision:
                raise ConflictError(
                    f"{ctype.value} changed since revision {meta.base_revision}: it is now "
                    f"at revision {head.revision}. Fetch it again and re-apply your change."
                )
            if deleting is not None:
                _refuse_if_referenced(before, ctype, deleting)
            return {ctype: Pending(change(head.items), description, name, located)}

        return self._commit(pending_for, meta)

    def _commit(self, pending_for: PendingFor, meta: WriteMeta) -> WriteResult:
        items: list[ItemChange] = []

        def plan(heads: Heads) -> list[NewRevision]:
            before = self._configs_of(heads)
            pending = self._build(before, heads, pending_for)
            items.extend(item_changes(before, pending))
            return new_revisions(pending, meta)

        revisions = self._store.write(plan)
        return WriteResult(revisions, items)

    def _build(
        self, before: Configs, heads: Heads, pending_for: PendingFor
    ) -> dict[ConfigType, Pending]:
        """What each type changes, checked against everything else that will be stored: the
        references it makes or breaks, and every pool it touches rendered with its defaults
        (docs/templates.md#checked-on-write)."""
        pending = pending_for(before, heads)
        effective = {
            ctype: effective_items(before, ctype, new.changes) for ctype, new in pending.items()
        }
        changed = {ctype: list(items) for ctype, items in effective.items()}
        after = before.with_changes(effective)
        for problem in references.new_problems(before, after, changed):
            raise located_error(problem, pending)
        if ConfigType.ROLE in changed and self._role_holders is not None:
            lockout = admin_lockout(before.roles, after.roles, self._role_holders())
            if lockout is not None:
                raise ConflictError(lockout)
        rendered = references.touched_pools(before, after, changed, references.TEMPLATE_TYPES)
        for problem in self._check_pools(before, after, rendered):
            raise located_error(problem, pending)
        return pending


def _refuse_if_referenced(configs: Configs, ctype: ConfigType, name: str) -> None:
    users = configs.referrers(ctype, name)
    if users:
        raise ConflictError(
            f"{ctype.label} {name} is used in pools {', '.join(users)}; remove it from "
            "those pools first."
        )
