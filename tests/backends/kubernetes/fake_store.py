"""The object store behind the fake Kubernetes API server (``fake_apiserver``).

Everything here is plain, synchronous Python guarded by one lock: the resource registry (core
kinds and the CRDs in ``schemas/crds``), selectors, the patch flavours, server-side apply field
ownership, validation, finalizers, the watch history and the write journal. The HTTP layer only
translates requests into calls on ``Store`` and ``KubeError`` into ``Status`` bodies.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from corral.domain.schemas.objects import CORE_KINDS, manifest_problems
from tests.conftest import REPO

Obj = dict[str, Any]
FieldPath = tuple[str, ...]

CRD_DIR = REPO / "schemas" / "crds"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRD_GROUP = "apiextensions.k8s.io"
#: Metadata the server owns: never taken from a request body, never validated as user input.
SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
#: Metadata fields that server-side apply tracks ownership of (like the real field manager).
OWNED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")
_NAME_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_POD_FIELDS = _NAME_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeError(Exception):
    """A refusal; the HTTP layer sends ``status()`` with ``code`` as the response."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


# --- resource registry ---------------------------------------------------------------------


@dataclass(frozen=True)
class ImmutableRule:
    """A CEL transition rule we can evaluate: ``self == oldSelf`` or the same on a projection
    ``self.map(x, x.f) == oldSelf.map(x, x.f)`` (only ``f`` of each list item is frozen)."""

    path: FieldPath
    message: str
    item_field: str | None = None

    def violated(self, old: Obj, new: Obj) -> bool:
        found_old, before = get_plain(old, self.path)
        found_new, after = get_plain(new, self.path)
        if not (found_old and found_new):  # transition rules only run when both sides exist
            return False
        if self.item_field is not None:
            before = [item.get(self.item_field) for item in before or []]
            after = [item.get(self.item_field) for item in after or []]
        return bool(before != after)


@dataclass
class ResourceType:
    """One REST resource: what discovery lists and how requests to it behave."""

    group: str
    versions: tuple[str, ...]
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    field_labels: frozenset[str] = _NAME_FIELDS
    schemas: dict[str, Obj] = field(default_factory=dict)  # CRD openAPIV3Schema per version
    immutable: tuple[ImmutableRule, ...] = ()
    is_crd: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``pods`` or ``podgroups.scheduling.run.ai``: how the server names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return f"{self.group}/{version}" if self.group else version


def core_types() -> list[ResourceType]:
    """The core ``v1`` kinds a controller of GPU workloads touches."""
    return [
        ResourceType(
            "",
            ("v1",),
            "pods",
            "pod",
            "Pod",
            True,
            frozenset({"status", "log"}),
            ("po",),
            field_labels=_POD_FIELDS,
        ),
        ResourceType(
            "", ("v1",), "services", "service", "Service", True, frozenset({"status"}), ("svc",)
        ),
        ResourceType(
            "", ("v1",), "secrets", "secret", "Secret", True, field_labels=_NAME_FIELDS | {"type"}
        ),
        ResourceType(
            "", ("v1",), "configmaps", "configmap", "ConfigMap", True, short_names=("cm",)
        ),
        ResourceType("", ("v1",), "events", "event", "Event", True, short_names=("ev",)),
        ResourceType(
            "",
            ("v1",),
            "namespaces",
            "namespace",
            "Namespace",
            False,
            frozenset({"status"}),
            ("ns",),
            field_labels=_NAME_FIELDS | {"status.phase"},
            verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        ),
        ResourceType(
            "",
            ("v1",),
            "nodes",
            "node",
            "Node",
            False,
            frozenset({"status"}),
            ("no",),
            field_labels=_NAME_FIELDS | {"spec.unschedulable"},
        ),
        ResourceType(
            "scheduling.k8s.io",
            ("v1",),
            "priorityclasses",
            "priorityclass",
            "PriorityClass",
            False,
            short_names=("pc",),
        ),
    ]


CRD_TYPE = ResourceType(
    CRD_GROUP,
    ("v1",),
    "customresourcedefinitions",
    "customresourcedefinition",
    "CustomResourceDefinition",
    False,
    short_names=("crd", "crds"),
    verbs=("get", "list", "watch"),
)


def _immutable_rules(schema: Obj, path: FieldPath = ()) -> list[ImmutableRule]:
    """Every ``self == oldSelf``-style rule in a CRD schema, with the field it guards."""
    rules: list[ImmutableRule] = []
    for rule in schema.get("x-kubernetes-validations", []):
        text = " ".join(str(rule.get("rule", "")).split())
        message = rule.get("message") or f"Invalid value: {text}"
        projection = re.fullmatch(
            r"self\.map\((\w+), \1\.(\w+)\) == oldSelf\.map\((\w+), \3\.\2\)", text
        )
        if text == "self == oldSelf":
            rules.append(ImmutableRule(path, message))
        elif projection:
            rules.append(ImmutableRule(path, message, projection.group(2)))
    for name, child in (schema.get("properties") or {}).items():
        rules += _immutable_rules(child, (*path, name))
    return rules


def crd_resource_type(crd: Obj) -> ResourceType:
    """Plural, kind, scope, versions, subresources and shortNames as the CRD itself says."""
    spec = crd["spec"]
    names = spec["names"]
    versions = [v for v in spec["versions"] if v.get("served", True)]
    versions.sort(key=lambda v: not v.get("storage", False))
    storage = versions[0]
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in versions),
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        subresources=frozenset((storage.get("subresources") or {}).keys()),
        short_names=tuple(names.get("shortNames", ())),
        schemas={v["name"]: v["schema"]["openAPIV3Schema"] for v in versions},
        immutable=tuple(_immutable_rules(storage["schema"]["openAPIV3Schema"])),
        is_crd=True,
    )


def load_crds(directory: Path = CRD_DIR) -> list[Obj]:
    crds: list[Obj] = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    return crds


def apply_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """Structural-schema defaulting: absent properties with a ``default`` get it, recursively,
    inside objects that are present (as the API server does before storing)."""
    if isinstance(value, dict):
        for name, child in (schema.get("properties") or {}).items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                apply_defaults(value[name], child)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            apply_defaults(item, schema["items"])
    return value


# --- selectors -----------------------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<nkey>[^\s!=<>(),]+)"
    r"|(?P<key>[^\s!=<>(),]+)\s*(?:(?P<op>==|=|!=|<|>)\s*(?P<value>[^\s!=<>(),]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # exists, !, =, !=, in, notin, <, >
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        try:  # < and >: integer comparison, absent or non-integer labels never match
            number, bound = int(value or ""), int(self.values[0])
        except ValueError:
            return False
        return number < bound if self.op == "<" else number > bound


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Full Kubernetes label selector syntax; a malformed one is a 400 like the real server."""
    requirements = []
    for part in _split_top_level(text or ""):
        match = _REQUIREMENT.match(part)
        if not match:
            raise KubeError(400, f"unable to parse requirement: {part.strip()!r}")
        if match["not"]:
            requirements.append(Requirement(match["nkey"], "!"))
        elif match["set"]:
            values = tuple(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append(Requirement(match["key"], match["set"], values))
        elif match["op"]:
            op = "=" if match["op"] == "==" else match["op"]
            requirements.append(Requirement(match["key"], op, (match["value"],)))
        else:
            requirements.append(Requirement(match["key"], "exists"))
    return requirements


def parse_field_selector(text: str | None, rtype: ResourceType) -> list[Requirement]:
    """``field=value``, ``field==value``, ``field!=value`` on the fields the kind supports."""
    requirements = []
    for part in _split_top_level(text or ""):
        match = re.fullmatch(r"\s*([\w.]+)\s*(==|=|!=)\s*(\S*)\s*", part)
        if not match:
            raise KubeError(400, f"invalid selector: {part.strip()!r}")
        key, op, value = match.groups()
        if key not in rtype.field_labels:
            raise KubeError(400, f"field label not supported: {key}")
        requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
    return requirements


def field_values(obj: Obj, keys: Iterable[str]) -> dict[str, str]:
    values = {}
    for key in keys:
        found, value = get_plain(obj, tuple(key.split(".")))
        if isinstance(value, bool):
            value = str(value).lower()
        values[key] = "" if not found or value is None else str(value)
    return values


@dataclass(frozen=True)
class Selector:
    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        labels = obj.get("metadata", {}).get("labels") or {}
        if not all(req.matches(labels) for req in self.labels):
            return False
        values = field_values(obj, [req.key for req in self.fields])
        return all(req.matches(values) for req in self.fields)


# --- plain paths, patches and merges --------------------------------------------------------


def get_plain(obj: Any, path: FieldPath) -> tuple[bool, Any]:
    """``(found, value)`` at a path of map keys."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return False, None
        obj = obj[key]
    return True, obj


def is_keyed_list(value: Any) -> bool:
    """Lists of objects with a ``name`` merge by name (containers, env, volumes, ...)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and "name" in item for item in value)
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, path: FieldPath = ()) -> Any:
    """Merge patch, except that lists of named objects merge by name (honouring
    ``$patch: delete``) and ``metadata.finalizers`` merges as a set (honouring
    ``$deleteFromPrimitiveList/finalizers``), as for the core types' patch strategies."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: v for k, v in copy.deepcopy(patch).items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [item for item in result.get(name, []) if item not in value]
            continue
        current = result.get(key)
        if value is None:
            result.pop(key, None)
        elif (*path, key) == ("metadata", "finalizers") and isinstance(value, list):
            result[key] = list(current or []) + [v for v in value if v not in (current or [])]
        elif isinstance(value, list) and (is_keyed_list(value) or is_keyed_list(current)):
            result[key] = _merge_named_items(current or [], value, (*path, key))
        else:
            result[key] = strategic_merge_patch(current, value, (*path, key))
    return result


def _merge_named_items(current: list[Obj], patch: list[Obj], path: FieldPath) -> list[Obj]:
    merged = copy.deepcopy(current)
    for item in patch:
        index = next(
            (i for i, old in enumerate(merged) if old.get("name") == item.get("name")), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append(strategic_merge_patch({}, item, path))
        else:
            merged[index] = strategic_merge_patch(merged[index], item, path)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise KubeError(422, f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    for part in parts[:-1]:
        try:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        except (KeyError, IndexError, ValueError) as error:
            raise KubeError(422, f"json patch: path not found at {part!r}") from error
    return doc, parts[-1]


def _read(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError) as error:
        raise KubeError(422, f"json patch: path {'/'.join(parts)!r} not found") from error


def _remove(doc: Any, parts: list[str]) -> Any:
    value = _read(doc, parts)
    parent, last = _parent(doc, parts)
    if isinstance(parent, list):
        parent.pop(int(last))
    else:
        del parent[last]
    return value


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts)
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise KubeError(422, f"json patch: index {index} out of range")
        parent.insert(index, copy.deepcopy(value))
    elif isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    else:
        raise KubeError(422, f"json patch: cannot add below a {type(parent).__name__}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise KubeError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for operation in operations:
        op, parts = operation.get("op"), _pointer(operation.get("path", ""))
        if op == "add":
            doc = _add(doc, parts, operation.get("value"))
        elif op == "remove":
            _remove(doc, parts)
        elif op == "replace":
            _read(doc, parts)
            doc = _add(doc, parts, operation.get("value")) if not parts else doc
            if parts:
                parent, last = _parent(doc, parts)
                key = int(last) if isinstance(parent, list) else last
                parent[key] = copy.deepcopy(operation.get("value"))
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from", ""))
            value = _remove(doc, source) if op == "move" else copy.deepcopy(_read(doc, source))
            doc = _add(doc, parts, value)
        elif op == "test":
            if _read(doc, parts) != operation.get("value"):
                raise KubeError(422, f"json patch: test failed at {operation.get('path')!r}")
        else:
            raise KubeError(422, f"json patch: unknown operation {op!r}")
    return doc


# --- server-side apply field sets -------------------------------------------------------------


def _segments(value: Any, prefix: FieldPath, path: FieldPath) -> set[FieldPath]:
    if isinstance(value, dict) and value:
        leaves: set[FieldPath] = set()
        for key, child in value.items():
            leaves |= _segments(child, (*prefix, f"f:{key}"), (*path, key))
        return leaves
    if is_keyed_list(value):
        leaves = set()
        for item in value:
            marker = "k:" + json.dumps({"name": item["name"]}, separators=(",", ":"))
            leaves |= _segments(item, (*prefix, marker), path)
        return leaves
    if path == ("metadata", "finalizers") and isinstance(value, list):
        return {(*prefix, "v:" + json.dumps(item)) for item in value}
    return {prefix}  # scalars, empty maps and atomic lists are leaves


def owned_paths(obj: Obj, *, status: bool = False) -> set[FieldPath]:
    """The leaf fields of ``obj`` a field manager can own (``status`` only when asked)."""
    trimmed = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    if status:
        trimmed = {"status": obj["status"]} if "status" in obj else {}
    else:
        trimmed.pop("status", None)
    metadata = obj.get("metadata") or {}
    owned_meta = {k: metadata[k] for k in OWNED_METADATA if metadata.get(k)}
    if owned_meta and not status:
        trimmed["metadata"] = owned_meta
    return _segments(trimmed, (), ())


def get_field(obj: Any, path: FieldPath) -> tuple[bool, Any]:
    """``(found, value)`` at a managed-fields path (``f:``, ``k:`` and ``v:`` segments)."""
    for segment in path:
        kind, _, text = segment.partition(":")
        if kind == "f" and isinstance(obj, dict) and text in obj:
            obj = obj[text]
        elif kind == "k" and isinstance(obj, list):
            name = json.loads(text)["name"]
            obj = next(
                (item for item in obj if isinstance(item, dict) and item.get("name") == name), None
            )
            if obj is None:
                return False, None
        elif kind == "v" and isinstance(obj, list):
            value = json.loads(text)
            return (value in obj), value
        else:
            return False, None
    return True, obj


def remove_field(obj: Obj, path: FieldPath) -> None:
    """Remove one owned leaf, then the keyed-list items and maps it leaves empty."""
    chain: list[tuple[Any, str]] = []
    node: Any = obj
    for segment in path:
        kind, _, text = segment.partition(":")
        chain.append((node, segment))
        if kind == "f" and isinstance(node, dict) and text in node:
            node = node[text]
        elif kind == "k" and isinstance(node, list):
            name = json.loads(text)["name"]
            node = next((i for i in node if isinstance(i, dict) and i.get("name") == name), None)
        elif kind == "v" and isinstance(node, list):
            value = json.loads(text)
            if value in node:
                node.remove(value)
            break
        else:
            return
        if node is None:
            return
    else:
        parent, segment = chain[-1]
        _drop(parent, segment)
        chain.pop()
    for parent, segment in reversed(chain):  # prune what became empty
        _, child = get_field(parent, (segment,))
        if child in ({}, []) or (isinstance(child, dict) and set(child) == {"name"}):
            _drop(parent, segment)
        else:
            break


def _drop(parent: Any, segment: str) -> None:
    kind, _, text = segment.partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif kind == "k" and isinstance(parent, list):
        name = json.loads(text)["name"]
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get("name") == name)]


def apply_merge(target: Any, applied: Any) -> Any:
    """Merge an applied configuration: maps recursively, named lists by name, the rest replaced."""
    if not (isinstance(target, dict) and isinstance(applied, dict)):
        if is_keyed_list(applied) and is_keyed_list(target):
            merged = copy.deepcopy(target)
            for item in applied:
                index = next(
                    (i for i, old in enumerate(merged) if old["name"] == item["name"]), None
                )
                if index is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[index] = apply_merge(merged[index], item)
            return merged
        return copy.deepcopy(applied)
    result = copy.deepcopy(target)
    for key, value in applied.items():
        result[key] = apply_merge(result.get(key), value)
    return result


def to_fields_v1(paths: Iterable[FieldPath]) -> Obj:
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for segment in path:
            node = node.setdefault(segment, {})
    return tree


def from_fields_v1(tree: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for segment, child in tree.items():
        if segment == ".":
            continue
        if child:
            paths |= from_fields_v1(child, (*prefix, segment))
        else:
            paths.add((*prefix, segment))
    return paths


def dotted(path: FieldPath) -> str:
    """``.spec.containers[name="a"].image``: how the server lists conflicting fields."""
    text = ""
    for segment in path:
        kind, _, rest = segment.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            text += (
                "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items()) + "]"
            )
        else:
            text += f"[={rest}]"
    return text


# --- the store -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalEntry:
    """One successful write, in commit order."""

    verb: str  # create, update, patch, apply, delete, finalize
    api_version: str
    kind: str
    namespace: str | None
    name: str
    resource_version: str


@dataclass(frozen=True)
class Change:
    """One retained watch event: ``old`` lets a selective watcher see objects leave its view."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: tuple[str, str]
    namespace: str | None
    old: Obj | None
    new: Obj


@dataclass(frozen=True)
class Denial:
    verb: str
    group: str
    resource: str
    namespace: str | None

    def covers(self, verb: str, group: str, resource: str, namespace: str | None) -> bool:
        return (
            self.verb in ("*", verb)
            and self.group in ("*", group)
            and self.resource in ("*", resource)
            and (self.namespace is None or self.namespace == namespace)
        )


ObjectKey = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name


class Store:
    """All objects, with the write semantics of the API server. Thread-safe: one ``RLock``."""

    def __init__(self, history_limit: int = 1000) -> None:
        self.lock = threading.RLock()
        self.history_limit = history_limit
        self._rv = 0
        self._objects: dict[ObjectKey, Obj] = {}
        self._history: deque[Change] = deque()
        self._floor = 0  # events after this resourceVersion are all retained
        self.journal: list[JournalEntry] = []
        self.types: dict[tuple[str, str], ResourceType] = {}
        self.denials: list[Denial] = []
        self.pod_logs: dict[tuple[str, str], str] = {}
        self.reset()

    # registry

    def reset(self) -> None:
        """Back to a fresh cluster: default namespaces, the vendored CRDs, nothing else."""
        with self.lock:
            self._objects.clear()
            self._history.clear()
            self._floor = self._rv
            self.journal.clear()
            self.denials.clear()
            self.pod_logs.clear()
            self.types = {t.key: t for t in [*core_types(), CRD_TYPE]}
            for crd in load_crds():
                self.add_crd(crd)
            for name in ("default", "kube-system"):
                self.create_namespace(name)
            self.journal.clear()

    def add_crd(self, crd: Obj) -> ResourceType:
        with self.lock:
            rtype = crd_resource_type(crd)
            self.types[rtype.key] = rtype
            stored = copy.deepcopy(crd)
            stored["metadata"] = {"name": f"{rtype.plural}.{rtype.group}"}
            self._write(CRD_TYPE, None, stored, "create", validate=False)
            return rtype

    def remove_crd(self, group: str, plural: str) -> None:
        """Like deleting the CRD: its objects go too, and its endpoints answer 404."""
        with self.lock:
            for key in [k for k in self._objects if k[:2] == (group, plural)]:
                self._delete_now(key, "delete")
            self.types.pop((group, plural), None)
            crd_key = (CRD_GROUP, CRD_TYPE.plural, "", f"{plural}.{group}")
            if crd_key in self._objects:
                self._delete_now(crd_key, "delete")

    def find_type(self, group: str, version: str, plural: str) -> ResourceType | None:
        rtype = self.types.get((group, plural))
        return rtype if rtype is not None and version in rtype.versions else None

    def type_of(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        for rtype in self.types.values():
            if rtype.group == group and rtype.kind == kind and version in rtype.versions:
                return rtype
        raise KubeError(404, f"no kind {kind!r} is registered for version {api_version!r}")

    def create_namespace(self, name: str) -> Obj:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        return self.create(self.types[("", "namespaces")], None, ns, manager="corral-fake")

    # reads

    @property
    def resource_version(self) -> int:
        return self._rv

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> ObjectKey:
        return (rtype.group, rtype.plural, namespace or "", name)

    def _served(self, rtype: ResourceType, obj: Obj, version: str | None = None) -> Obj:
        served = copy.deepcopy(obj)
        served["apiVersion"] = rtype.api_version(version)
        served["kind"] = rtype.kind
        return served

    def _existing(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get(self._key(rtype, namespace, name))
        if obj is None:
            raise KubeError(
                404,
                f'{rtype.qualified} "{name}" not found',
                details={"name": name, "group": rtype.group, "kind": rtype.plural},
            )
        return obj

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.lock:
            return self._served(rtype, self._existing(rtype, namespace, name))

    def select(
        self, rtype: ResourceType, namespace: str | None, selector: Selector = Selector()
    ) -> tuple[list[Obj], int]:
        """Matching objects in creation order, and the resourceVersion they are current at."""
        with self.lock:
            items = [
                self._served(rtype, obj)
                for key, obj in self._objects.items()
                if key[:2] == rtype.key
                and (namespace is None or key[2] == namespace)
                and selector.matches(obj)
            ]
            return items, self._rv

    def all_objects(self) -> list[Obj]:
        with self.lock:
            return [copy.deepcopy(obj) for obj in self._objects.values()]

    def changes_after(self, rv: int) -> list[Change]:
        """Retained events newer than ``rv``; ``KubeError(410)`` when some were compacted."""
        with self.lock:
            if rv < self._floor:
                raise KubeError(
                    410, f"too old resource version: {rv} ({self._floor})", reason="Expired"
                )
            return [change for change in self._history if change.rv > rv]

    def compact(self) -> None:
        """Drop the whole watch history, as etcd compaction does."""
        with self.lock:
            self._history.clear()
            self._floor = self._rv

    # writes

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        body: Obj,
        manager: str,
        verb: str = "create",
    ) -> Obj:
        with self.lock:
            name = self._check_identity(rtype, namespace, body, None)
            if rtype.namespaced:
                self._require_namespace(namespace or "")
            if self._key(rtype, namespace, name) in self._objects:
                raise KubeError(
                    409,
                    f'{rtype.qualified} "{name}" already exists',
                    reason="AlreadyExists",
                    details={"name": name, "group": rtype.group, "kind": rtype.plural},
                )
            obj = copy.deepcopy(body)
            obj["status"] = self._initial_status(rtype, obj)
            if obj["status"] is None:
                del obj["status"]
            operation = "Apply" if verb == "apply" else "Update"
            self._set_managed(obj, rtype, {(manager, operation, ""): owned_paths(obj)})
            return self._served(rtype, self._write(rtype, namespace, obj, verb))

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Obj,
        manager: str,
        *,
        verb: str = "update",
        subresource: str | None = None,
        check_version: bool = True,
    ) -> Obj:
        """PUT semantics: replace, keeping server metadata; ``status`` only via its subresource."""
        with self.lock:
            old = self._existing(rtype, namespace, name)
            self._check_identity(rtype, namespace, body, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if check_version and sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise KubeError(
                    409,
                    f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object '
                    "has been modified; please apply your changes to the latest version and try "
                    "again",
                    details={"name": name, "group": rtype.group, "kind": rtype.plural},
                )
            new = self._merge_for_subresource(rtype, old, copy.deepcopy(body), subresource)
            fields = self._track_update(rtype, old, new, manager, subresource)
            self._set_managed(new, rtype, fields)
            return self._served(rtype, self._write(rtype, namespace, new, verb, old=old))

    def apply(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        applied: Obj,
        manager: str,
        *,
        force: bool,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """Server-side apply; ``(object, created)``."""
        with self.lock:
            self._check_identity(rtype, namespace, applied, name)
            on_status = subresource == "status"
            if not on_status and "status" in rtype.subresources:
                applied = {k: v for k, v in applied.items() if k != "status"}
            key = self._key(rtype, namespace, name)
            if key not in self._objects:
                if on_status:
                    self._existing(rtype, namespace, name)
                return self.create(rtype, namespace, applied, manager, verb="apply"), True
            old = self._objects[key]
            fields = self._managed(old)
            mine = (manager, "Apply", subresource or "")
            wanted = owned_paths(applied, status=on_status)
            conflicts = [
                (owner[0], path)
                for owner, paths in fields.items()
                if owner != mine
                for path in sorted(paths & wanted)
                if get_field(old, path) != get_field(applied, path)
            ]
            if conflicts and not force:
                raise _apply_conflict(conflicts, rtype.api_version())
            for owner in fields:
                if owner != mine:
                    fields[owner] -= {path for _, path in conflicts}
            others = set().union(*(p for o, p in fields.items() if o != mine))
            new = copy.deepcopy(old)
            for path in sorted(fields.get(mine, set()) - wanted - others, key=len, reverse=True):
                remove_field(new, path)
            new = apply_merge(new, {k: v for k, v in applied.items() if k != "metadata"})
            meta = applied.get("metadata") or {}
            new["metadata"] = apply_merge(
                new["metadata"], {k: v for k, v in meta.items() if k in OWNED_METADATA}
            )
            if on_status:
                new = self._merge_for_subresource(rtype, old, new, "status")
            fields[mine] = wanted
            self._set_managed(new, rtype, fields)
            return self._served(rtype, self._write(rtype, namespace, new, "apply", old=old)), False

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        manager: str,
        subresource: str | None = None,
    ) -> Obj:
        """merge, strategic (core kinds only, as on a real server) and json patches."""
        with self.lock:
            current = self._served(rtype, self._existing(rtype, namespace, name))
            if patch_type == "merge":
                new = merge_patch(current, patch)
            elif patch_type == "strategic":
                if rtype.is_crd:
                    raise KubeError(
                        415,
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml",
                    )
                new = strategic_merge_patch(current, patch)
            else:
                new = json_patch(current, patch)
            if not isinstance(new, dict):
                raise KubeError(422, "the patch does not produce an object")
            return self.update(
                rtype, namespace, name, new, manager, verb="patch", subresource=subresource
            )

    def delete(
        self, rtype: ResourceType, namespace: str | None, name: str, grace_seconds: int = 0
    ) -> Obj:
        """Remove at once, or only mark for deletion while finalizers remain."""
        with self.lock:
            old = self._existing(rtype, namespace, name)
            key = self._key(rtype, namespace, name)
            if old["metadata"].get("deletionTimestamp"):
                return self._served(rtype, old)
            if not old["metadata"].get("finalizers"):
                if rtype.key == ("", "namespaces"):
                    for inner in [k for k in self._objects if k[2] == name and k[:2] != rtype.key]:
                        self._delete_now(inner, "delete")
                return self._served(rtype, self._delete_now(key, "delete"))
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
            return self._served(rtype, self._write(rtype, namespace, new, "delete", old=old))

    # internals

    def _check_identity(
        self, rtype: ResourceType, namespace: str | None, body: Obj, url_name: str | None
    ) -> str:
        """apiVersion/kind/name/namespace of a body must agree with the request."""
        if not isinstance(body, dict):
            raise KubeError(400, "the request body must be a JSON object")
        if body.get("kind") not in (None, rtype.kind):
            raise KubeError(
                400, f"the kind of the object ({body.get('kind')}) does not match {rtype.kind}"
            )
        body["kind"] = rtype.kind
        body.setdefault("apiVersion", rtype.api_version())
        metadata = body.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise KubeError(400, "metadata must be an object")
        name = metadata.get("name")
        if url_name is not None and name not in (None, url_name):
            raise KubeError(
                400,
                f"the name of the object ({name}) does not match the name on the URL ({url_name})",
            )
        name = name or url_name
        if not name:
            raise KubeError(
                422,
                f"{rtype.kind}.metadata.name: Required value: name is required",
                details={
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: name is required",
                            "field": "metadata.name",
                        }
                    ]
                },
            )
        metadata["name"] = name
        if rtype.namespaced:
            if metadata.get("namespace") not in (None, namespace):
                raise KubeError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request",
                )
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        return str(name)

    def _require_namespace(self, namespace: str) -> None:
        if ("", "namespaces", "", namespace) not in self._objects:
            raise KubeError(
                404,
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )

    @staticmethod
    def _initial_status(rtype: ResourceType, obj: Obj) -> Any:
        """What the real strategies' PrepareForCreate leave in ``status``."""
        if rtype.key == ("", "pods"):
            return {"phase": "Pending"}
        if rtype.key == ("", "namespaces"):
            return {"phase": "Active"}
        if rtype.key == ("", "services"):
            return {"loadBalancer": {}}
        if rtype.is_crd and "status" in rtype.subresources:
            return None
        return obj.get("status")

    @staticmethod
    def _merge_for_subresource(
        rtype: ResourceType, old: Obj, new: Obj, subresource: str | None
    ) -> Obj:
        """The main endpoint cannot change status; the status endpoint can change only status."""
        if subresource == "status":
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        if "status" in rtype.subresources:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        return new

    @staticmethod
    def _managed(obj: Obj) -> dict[tuple[str, str, str], set[FieldPath]]:
        return {
            (e["manager"], e["operation"], e.get("subresource", "")): from_fields_v1(
                e.get("fieldsV1", {})
            )
            for e in obj["metadata"].get("managedFields", [])
        }

    def _track_update(
        self, rtype: ResourceType, old: Obj, new: Obj, manager: str, subresource: str | None
    ) -> dict[tuple[str, str, str], set[FieldPath]]:
        """A non-apply write takes over every field whose value it changed (it never conflicts)."""
        on_status = subresource == "status"
        before, after = owned_paths(old, status=on_status), owned_paths(new, status=on_status)
        changed = {p for p in after if p not in before or get_field(old, p) != get_field(new, p)}
        fields = self._managed(old)
        for owner in fields:
            fields[owner] -= changed
        mine = (manager, "Update", subresource or "")
        fields[mine] = fields.get(mine, set()) | changed
        return fields

    def _set_managed(
        self, obj: Obj, rtype: ResourceType, fields: dict[tuple[str, str, str], set[FieldPath]]
    ) -> None:
        present = owned_paths(obj) | owned_paths(obj, status=True)
        previous = {
            (e["manager"], e["operation"], e.get("subresource", "")): e
            for e in obj["metadata"].get("managedFields", [])
        }
        entries = []
        for (manager, operation, subresource), paths in fields.items():
            paths = {p for p in paths if p in present or get_field(obj, p)[0]}
            if not paths:
                continue
            entry: Obj = {
                "manager": manager,
                "operation": operation,
                "apiVersion": rtype.api_version(),
                "time": previous.get((manager, operation, subresource), {}).get("time") or now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(paths),
            }
            if subresource:
                entry["subresource"] = subresource
            entries.append(entry)
        obj["metadata"]["managedFields"] = entries

    def _write(
        self,
        rtype: ResourceType,
        namespace: str | None,
        obj: Obj,
        verb: str,
        *,
        old: Obj | None = None,
        validate: bool = True,
    ) -> Obj:
        """Validate, fill server metadata, store, record the event and the journal entry."""
        meta = obj["metadata"]
        if rtype.is_crd:
            apply_defaults(obj, rtype.schemas.get(obj["apiVersion"].rpartition("/")[2], {}))
        if validate:
            self._validate(rtype, obj, old)
        if old is not None:
            for field_name in ("uid", "creationTimestamp", "generation"):
                meta[field_name] = old["metadata"][field_name]
            for field_name in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if field_name in old["metadata"]:
                    meta.setdefault(field_name, old["metadata"][field_name])
            if _spec_part(rtype, obj) != _spec_part(rtype, old):
                meta["generation"] = old["metadata"]["generation"] + 1
        else:
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        key = self._key(rtype, namespace, meta["name"])
        if old is not None and _unchanged(obj, old):
            return old  # as the real server: a no-op write stores nothing, keeps the version
        if (
            old is not None
            and old["metadata"].get("deletionTimestamp")
            and not meta.get("finalizers")
        ):
            self._journal(verb, rtype, obj, str(self._rv + 1))
            return self._delete_now(key, "finalize")
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._record(
            Change(
                self._rv,
                "MODIFIED" if old else "ADDED",
                rtype.key,
                namespace,
                copy.deepcopy(old),
                copy.deepcopy(obj),
            )
        )
        self._journal(verb, rtype, obj, str(self._rv))
        return obj

    def _delete_now(self, key: ObjectKey, verb: str) -> Obj:
        obj = self._objects.pop(key)
        rtype = self.types.get(key[:2]) or CRD_TYPE
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._record(Change(self._rv, "DELETED", key[:2], key[2] or None, copy.deepcopy(obj), gone))
        self._journal(verb, rtype, gone, str(self._rv))
        if key[:2] == ("", "pods"):
            self.pod_logs.pop((key[2], key[3]), None)
        return gone

    def _validate(self, rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Schema check with the project's validator, CEL immutability, finalizer rules."""
        body = copy.deepcopy(obj)
        body.pop("status", None)
        for field_name in SERVER_METADATA:
            body["metadata"].pop(field_name, None)
        if rtype.is_crd or (rtype.group == "" and rtype.kind in CORE_KINDS):
            problems = manifest_problems(body)
        else:
            problems = _minimal_problems(rtype, body)
        causes = [_cause(problem) for problem in problems]
        if old is not None:
            causes += [
                {
                    "reason": "FieldValueInvalid",
                    "message": rule.message,
                    "field": ".".join(rule.path),
                }
                for rule in rtype.immutable
                if rule.violated(old, obj)
            ]
            if old["metadata"].get("deletionTimestamp"):
                added = set(obj["metadata"].get("finalizers") or []) - set(
                    old["metadata"].get("finalizers") or []
                )
                if added:
                    causes.append(
                        {
                            "reason": "FieldValueForbidden",
                            "field": "metadata.finalizers",
                            "message": "Forbidden: no new finalizers can be added if the "
                            "object is being deleted",
                        }
                    )
        if causes:
            name = obj["metadata"].get("name")
            summary = ", ".join(
                f"{c['field']}: {c['message']}" if c["field"] else c["message"] for c in causes
            )
            raise KubeError(
                422,
                f'{rtype.qualified_kind} "{name}" is invalid: {summary}',
                details={"name": name, "group": rtype.group, "kind": rtype.kind, "causes": causes},
            )

    def _record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self.history_limit:
            self._floor = self._history.popleft().rv

    def _journal(self, verb: str, rtype: ResourceType, obj: Obj, rv: str) -> None:
        meta = obj["metadata"]
        self.journal.append(
            JournalEntry(
                verb,
                obj.get("apiVersion") or rtype.api_version(),
                rtype.kind,
                meta.get("namespace"),
                meta["name"],
                rv,
            )
        )


def _spec_part(rtype: ResourceType, obj: Obj) -> Obj:
    """What ``generation`` tracks: everything but metadata (and status when it is separate)."""
    skip = {"metadata", "apiVersion", "kind"} | (
        {"status"} if "status" in rtype.subresources else set()
    )
    return {k: v for k, v in obj.items() if k not in skip}


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _minimal_problems(rtype: ResourceType, body: Obj) -> list[str]:
    """Kinds ``manifest_problems`` has no schema for: names, and that maps are maps."""
    name = str(body["metadata"].get("name"))
    problems = []
    if rtype.kind == "Namespace" and (len(name) > 63 or not _DNS_LABEL.fullmatch(name)):
        problems.append(f"metadata.name: {name!r} is not a DNS-1123 label")
    elif len(name) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name):
        problems.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    for key in ("spec", "metadata"):
        if key in body and not isinstance(body[key], dict):
            problems.append(f"{key}: must be an object")
    for key in ("labels", "annotations"):
        values = body["metadata"].get(key) or {}
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            problems.append(f"metadata.{key}: values must be strings")
    return problems


def _cause(problem: str) -> Obj:
    """``spec.minMember: -1 is less than ...`` -> a ``StatusCause`` naming the field."""
    where, sep, message = problem.partition(": ")
    if sep and " " not in where:
        return {"reason": "FieldValueInvalid", "message": message, "field": where}
    return {"reason": "FieldValueInvalid", "message": problem, "field": ""}


def _apply_conflict(conflicts: list[tuple[str, FieldPath]], api_version: str) -> KubeError:
    lines = [
        f'conflict with "{manager}" using {api_version}: {dotted(path)}'
        for manager, path in conflicts
    ]
    message = f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
    return KubeError(
        409,
        message + "\n".join(lines),
        details={
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{manager}" using {api_version}',
                    "field": dotted(path),
                }
                for manager, path in conflicts
            ]
        },
    )


def _unchanged(new: Obj, old: Obj) -> bool:
    def content(obj: Obj) -> Obj:
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        return {**obj, "metadata": meta}

    return content(new) == content(old)
