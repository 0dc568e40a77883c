"""Reading a cluster description: errors at FILE:LINE:COL, and the fields of a node that every
format shares (name, labels, taints, allocatable)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.domain.formats.documents import locate
from corral.domain.formats.json_paths import Path, format_path
from corral.domain.formats.kubernetes_names import label_key_problem, label_value_problem
from corral.domain.formats.quantities import parse_quantity
from corral.domain.formats.unknown_fields import unknown_field
from corral.domain.platform.nodes import GPU_RESOURCE, MAX_GPUS, Node, Taint
from corral.errors import UserError

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The resources corral's format knows; a NodeList keeps whatever the node reports.
ALLOCATABLE_KEYS = ("cpu", "memory", "ephemeral-storage", GPU_RESOURCE, "pods")
#: Other resources a node may offer: extended resources are named with a domain
#: (``nvidia.com/mig-1g.10gb``, ``rdma/ib``), huge pages by their size.
EXTENDED_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9][-A-Za-z0-9_.]*"
    r"|hugepages-[0-9]+[KMGT]i)$"
)
TAINT_KEYS = ("key", "value", "effect")
KUBERNETES_TAINT_KEYS = (*TAINT_KEYS, "timeAdded")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# ------------------------------------------------------------------------------------ errors


@dataclass(frozen=True)
class Reader:
    """The text being read, to point errors at the line and column of a field path."""

    text: str
    source: str

    def where(self, path: Path) -> str:
        try:
            position = locate(self.text, path) if path else None
        except RecursionError:
            position = None
        return f"{self.source}:{position}" if position else self.source

    def error(self, path: Path, reason: str) -> UserError:
        field = f" {format_path(path)}:" if path else ""
        return UserError(f"{self.where(path)}:{field} {reason}")


#: A node and the path of the entry that made it (``nodes[3]`` or ``generate[0]``).
Placed = tuple[Node, Path]


def mapping_at(reader: Reader, value: Any, path: Path, what: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise reader.error(path, f"{what} must be a mapping, not {kind_of(value)}")
    return value


def list_at(reader: Reader, value: Any, path: Path, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise reader.error(path, f"{what} must be a list, not {kind_of(value)}")
    return value


def kind_of(value: Any) -> str:
    if value is None:
        return "empty"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return names.get(type(value), type(value).__name__)


def reject_unknown(
    reader: Reader, value: Mapping[Any, Any], path: Path, allowed: Sequence[str]
) -> None:
    for key in value:
        if key not in allowed:
            raise reader.error((*path, str(key)), unknown_field(key, allowed))


def require(reader: Reader, value: Mapping[Any, Any], path: Path, key: str) -> Any:
    if value.get(key) is None:
        raise reader.error(path, f"`{key}` is missing; add it")
    return value[key]


# ------------------------------------------------------------------------------ node fields


def node_name(reader: Reader, value: Any, path: Path) -> str:
    if not isinstance(value, str):
        raise reader.error(path, f"a node name must be a string, not {kind_of(value)}")
    if len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise reader.error(
            path,
            f"{value!r} is not a valid node name: use at most 253 lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit",
        )
    return value


def labels_at(reader: Reader, value: Any, path: Path) -> dict[str, str]:
    if value is None:
        return {}
    labels = mapping_at(reader, value, path, "`labels`")
    return {
        label_key(reader, key, (*path, str(key))): label_value(reader, item, (*path, str(key)))
        for key, item in labels.items()
    }


def label_key(reader: Reader, key: Any, path: Path) -> str:
    if not isinstance(key, str):
        raise reader.error(path, f"a label key must be a string, not {kind_of(key)}")
    problem = label_key_problem(key)
    if problem:
        raise reader.error(path, f"{key!r} is not a valid Kubernetes label key: {problem}")
    return key


def label_value(reader: Reader, value: Any, path: Path) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise reader.error(
            path, f"a label value must be a string, not {kind_of(value)}; put it in quotes"
        )
    problem = label_value_problem(value)
    if problem:
        raise reader.error(path, f"not a valid Kubernetes label value: {problem}")
    return value


def taints_at(reader: Reader, value: Any, path: Path, allowed: Sequence[str]) -> tuple[Taint, ...]:
    if value is None:
        return ()
    entries = list_at(reader, value, path, "`taints`")
    return tuple(
        _taint(reader, entry, (*path, index), allowed) for index, entry in enumerate(entries)
    )


def _taint(reader: Reader, entry: Any, path: Path, allowed: Sequence[str]) -> Taint:
    entry = mapping_at(reader, entry, path, "a taint")
    if allowed == TAINT_KEYS:
        reject_unknown(reader, entry, path, allowed)
    key = label_key(reader, require(reader, entry, path, "key"), (*path, "key"))
    raw_value = entry.get("value")
    value = "" if raw_value is None else label_value(reader, raw_value, (*path, "value"))
    effect = require(reader, entry, path, "effect")
    if effect not in TAINT_EFFECTS:
        raise reader.error(
            (*path, "effect"),
            f"{effect!r} is not a taint effect; use one of {', '.join(TAINT_EFFECTS)}",
        )
    return Taint(key=key, effect=str(effect), value=value)


def allocatable_at(reader: Reader, value: Any, path: Path, strict: bool) -> dict[str, str]:
    if value is None:
        return {}
    resources = mapping_at(reader, value, path, "`allocatable`")
    if strict:
        reject_unknown(
            reader,
            {key: item for key, item in resources.items() if not _extended(key)},
            path,
            ALLOCATABLE_KEYS,
        )
    return {
        str(key): _quantity(reader, str(key), item, (*path, str(key)))
        for key, item in resources.items()
    }


def _extended(key: Any) -> bool:
    return isinstance(key, str) and key != GPU_RESOURCE and EXTENDED_RESOURCE.match(key) is not None


def _quantity(reader: Reader, resource: str, value: Any, path: Path) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise reader.error(
            path, f'must be a Kubernetes quantity such as "64" or "512Gi", not {kind_of(value)}'
        )
    text = str(value)
    try:
        amount = parse_quantity(text)
    except (ValueError, ArithmeticError) as err:
        raise reader.error(path, str(err)) from None
    if amount < 0:
        raise reader.error(path, f"{text!r} is negative; allocatable resources are 0 or more")
    if resource == GPU_RESOURCE and (amount != amount.to_integral_value() or amount > MAX_GPUS):
        raise reader.error(path, f"{text!r} is not a whole number of GPUs up to {MAX_GPUS}")
    return text
