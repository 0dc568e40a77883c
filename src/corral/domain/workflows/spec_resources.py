"""A workflow's resource specs and timeouts, read and checked."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from corral.domain.formats.durations import parse_duration
from corral.domain.topology.podgroup import TopologyRequirement
from corral.domain.workflows.spec import (
    ResourceSpec,
    Timeouts,
)
from corral.domain.workflows.spec_reader import (
    RESOURCE_KEYS,
    SIZE,
    SIZE_UNITS,
    TIMEOUT_KEYS,
    TOPOLOGY_KEYS,
    Located,
    Path,
    Reader,
    kind_of,
)

# ------------------------------------------------------------------------------- resources


def parse_resources(reader: Reader, body: Mapping[str, Any], path: Path) -> dict[str, ResourceSpec]:
    if body.get("resources") is None:
        return {"default": ResourceSpec()}
    where = (*path, "resources")
    specs = reader.mapping(body["resources"], where, None)
    result: dict[str, ResourceSpec] = {}
    for name, raw in specs.items():
        if not isinstance(name, str) or not name:
            reader.fail((*where, str(name)), f"resource name {name!r} must be non-empty text.")
        result[name] = _parse_resource(reader, raw, (*where, name))
    return result


def _parse_resource(reader: Reader, value: Any, path: Path) -> ResourceSpec:
    body = reader.mapping(value, path, RESOURCE_KEYS)
    platform = body.get("platform")
    return ResourceSpec(
        cpu=_count(reader, body.get("cpu"), (*path, "cpu")),
        gpu=_count(reader, body.get("gpu"), (*path, "gpu")),
        memory=_size(reader, "memory", body.get("memory"), (*path, "memory")),
        storage=_size(reader, "storage", body.get("storage"), (*path, "storage")),
        platform=None if platform is None else reader.string(platform, (*path, "platform")),
        nodes_excluded=reader.string_list(body.get("nodesExcluded"), (*path, "nodesExcluded")),
        topology=_parse_topology(reader, body.get("topology"), (*path, "topology")),
    )


def _count(reader: Reader, value: Any, path: Path) -> int | None:
    """A whole number of CPUs or GPUs. An explicit 0 means zero (OSMO takes it as unset and
    gives the pool's default; docs/templates.md#differences-from-osmo)."""
    if value is None:
        return None
    number = _whole_number(value)
    if number is None or number < 0:
        reader.fail(path, f"must be a whole number (0 or more), not {kind_of(value)}.")
    return number


def _whole_number(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,18}", value.strip()):
        return int(value)
    return None


def _size(reader: Reader, name: str, value: Any, path: Path) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        reader.fail(path, f"must be a size such as 16Gi, not {kind_of(value)}.")
    text = str(value)
    check_size(reader, name, text, path)
    return text


def check_size(reader: Reader, name: str, text: str, path: Path) -> None:
    match = SIZE.match(text)
    if match is None:
        reader.fail(
            path,
            f"Resource {name} field has invalid value {text}. Write a number with an optional "
            f"unit, e.g. 16Gi (units: {', '.join(SIZE_UNITS)}).",
        )
    if match["unit"] and match["unit"] not in SIZE_UNITS:
        reader.fail(
            path,
            f"Resource {name} field has invalid unit: {match['unit']}. Use one of "
            f"{', '.join(SIZE_UNITS)} (GB and MB are not accepted; write Gi or Mi).",
        )


def _parse_topology(reader: Reader, value: Any, path: Path) -> tuple[TopologyRequirement, ...]:
    result: list[TopologyRequirement] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where,
                "a topology entry must be a mapping {key, group, requirementType}, "
                f"not {kind_of(raw)}.",
            )
        body = reader.mapping(raw, where, TOPOLOGY_KEYS)
        key = reader.string(reader.required(body, "key", where), (*where, "key"))
        group = body.get("group")
        group_name = (
            "default" if group is None else reader.string(group, (*where, "group"), coerce=True)
        )
        kind = body.get("requirementType", "required")
        if kind not in ("required", "preferred"):
            reader.fail(
                (*where, "requirementType"),
                f'requirementType must be "required" or "preferred", not {kind_of(kind)}.',
            )
        result.append(TopologyRequirement(key=key, group=group_name, required=kind == "required"))
    return tuple(result)


def check_resources_exist(
    reader: Reader,
    groups: list[Located],
    resources: Mapping[str, ResourceSpec],
    path: Path,
    *,
    uses_groups: bool,
) -> None:
    for group, tasks_path in groups:
        for index, task in enumerate(group.tasks):
            task_path = (*tasks_path, index) if uses_groups else tasks_path
            if task.resource in resources:
                continue
            defined = ", ".join(sorted(resources)) or "none"
            if task.resource == "default":
                reader.fail(
                    task_path,
                    f"Task {task.name} has no specified resource. Specify a default resource in "
                    f'the resources section (defined: {defined}), or set "resource:" on the task.',
                )
            reader.fail(
                (*task_path, "resource"),
                f"Requesting undefined resource {task.resource}. Defined resources: {defined}.",
            )


# -------------------------------------------------------------------------------- timeouts


def parse_timeouts(reader: Reader, value: Any, path: Path) -> Timeouts:
    body = reader.mapping(value, path, TIMEOUT_KEYS)
    exec_timeout, queue_timeout = (
        None if body.get(key) is None else duration(reader, body[key], (*path, key))
        for key in TIMEOUT_KEYS
    )
    return Timeouts(exec_timeout=exec_timeout, queue_timeout=queue_timeout)


def duration(reader: Reader, value: Any, path: Path) -> timedelta:
    """Seconds (int or float) or OSMO's duration text (``8h``, ``PT1H30M``)."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not value >= 0:
                raise ValueError(f"a duration cannot be negative ({value})")
            return timedelta(seconds=value)
        if isinstance(value, str):
            return parse_duration(value.strip())
    except OverflowError:
        reader.fail(path, f"duration {value} is too long; give at most a few years.")
    except ValueError as err:
        reader.fail(path, f"{err}.")
    reader.fail(
        path, f"must be a duration such as 8h, 30m or PT1H30M, or seconds, not {kind_of(value)}."
    )
