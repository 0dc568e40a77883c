"""Reading a node's health from a cluster description (docs/cluster.md#node-health): corral's
``unschedulable``, ``conditions`` and ``fabric`` keys, and a NodeList's ``spec.unschedulable``
and ``status.conditions``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from corral.domain.cluster.reader import Reader, kind_of, list_at, mapping_at, reject_unknown
from corral.domain.formats.json_paths import Path
from corral.domain.platform.node_health import HEALTHY, Cordon, Fabric, NodeHealth

CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")
#: What a NodeList's condition may also carry (ignored).
KUBERNETES_CONDITION_KEYS = (*CONDITION_KEYS, "lastHeartbeatTime")
CONDITION_STATUSES = ("True", "False", "Unknown")
CORDON_KEYS = ("by", "reason")
FABRIC_KEYS = ("state", "reason")
FABRIC_STATES = tuple(state.value for state in Fabric)


def health_at(
    reader: Reader,
    unschedulable: Any,
    conditions: Any,
    fabric: Any,
    paths: tuple[Path, Path, Path],
    *,
    kubernetes: bool = False,
) -> NodeHealth:
    """The health that a node's three fields describe (each may be absent: None)."""
    if unschedulable is None and conditions is None and fabric is None:
        return HEALTHY
    cordon_path, conditions_path, fabric_path = paths
    ready, since, why = _ready(reader, conditions, conditions_path, kubernetes)
    state, fabric_reason = _fabric(reader, fabric, fabric_path)
    return NodeHealth(
        ready=ready,
        ready_since=since,
        not_ready_reason=why,
        cordon=_cordon(reader, unschedulable, cordon_path),
        fabric=state,
        fabric_reason=fabric_reason,
    )


def _cordon(reader: Reader, value: Any, path: Path) -> Cordon | None:
    if value is None or value is False:
        return None
    if value is True:
        return Cordon()
    if not isinstance(value, Mapping):
        raise reader.error(
            path,
            f"must be true, false or a mapping with `by` and `reason`, not {kind_of(value)}",
        )
    reject_unknown(reader, value, path, CORDON_KEYS)
    return Cordon(
        by=_text(reader, value.get("by"), (*path, "by")),
        reason=_text(reader, value.get("reason"), (*path, "reason")),
    )


def _ready(
    reader: Reader, value: Any, path: Path, kubernetes: bool
) -> tuple[bool, datetime | None, str]:
    """Whether the ``Ready`` condition is True (a node without one is Ready), since when,
    and why not."""
    if value is None:
        return True, None, ""
    allowed = KUBERNETES_CONDITION_KEYS if kubernetes else CONDITION_KEYS
    for index, entry in enumerate(list_at(reader, value, path, "`conditions`")):
        where: Path = (*path, index)
        entry = mapping_at(reader, entry, where, "a condition")
        reject_unknown(reader, entry, where, allowed)
        if entry.get("type") != "Ready":
            continue
        status = entry.get("status")
        if status not in CONDITION_STATUSES:
            raise reader.error(
                (*where, "status"),
                f"{status!r} is not a condition status; use {', '.join(CONDITION_STATUSES)}",
            )
        since = _time(reader, entry.get("lastTransitionTime"), (*where, "lastTransitionTime"))
        why = " ".join(
            _text(reader, entry.get(key), (*where, key)) for key in ("reason", "message")
        ).strip()
        return status == "True", since, "" if status == "True" else why
    return True, None, ""


def _fabric(reader: Reader, value: Any, path: Path) -> tuple[Fabric, str]:
    if value is None:
        return Fabric.HEALTHY, ""
    reason = ""
    if isinstance(value, Mapping):
        reject_unknown(reader, value, path, FABRIC_KEYS)
        reason = _text(reader, value.get("reason"), (*path, "reason"))
        path, value = (*path, "state"), value.get("state")
    if value not in FABRIC_STATES:
        raise reader.error(
            path,
            f"{value!r} is not a fabric state; use {', '.join(FABRIC_STATES)} "
            "(or a mapping with `state` and `reason`)",
        )
    return Fabric(value), reason


def _text(reader: Reader, value: Any, path: Path) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise reader.error(path, f"must be a string, not {kind_of(value)}")
    return value


def _time(reader: Reader, value: Any, path: Path) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        found = value
    elif isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            raise reader.error(
                path, f"{value!r} is not a time; write it as 2026-11-27T10:00:00Z"
            ) from None
    else:
        raise reader.error(
            path, f"must be a time such as 2026-11-27T10:00:00Z, not {kind_of(value)}"
        )
    return found if found.tzinfo else found.replace(tzinfo=UTC)
