"""What a task may ask of its platform: privileged mode, host network, host mounts
(docs/configs/pool.md).

Messages are OSMO's. Unlike OSMO, mount paths are compared after normalisation (``/data/`` is
``/data``), and relative paths and ``..`` components are refused, so that a task cannot reach
outside an allowed mount (``/data/../etc``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.domain.configs.models import Platform
from corral.domain.labels import CONTROL_CONTAINER
from corral.errors import UserError


def default_mounts(pod_template: Mapping[str, Any]) -> list[str]:
    """The ``mountPath`` of every volume mount of every container but ``osmo-ctrl`` in the
    merged pod template, in order, without duplicates.

    Parts of the wrong shape are skipped: the template's own validation reports them.
    """
    spec = pod_template.get("spec") if isinstance(pod_template, Mapping) else None
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    paths: list[str] = []
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, Mapping) or container.get("name") == CONTROL_CONTAINER:
            continue
        mounts = container.get("volumeMounts")
        for mount in mounts if isinstance(mounts, list) else []:
            path = mount.get("mountPath") if isinstance(mount, Mapping) else None
            if isinstance(path, str) and path not in paths:
                paths.append(path)
    return paths


def check_task_security(
    task: str,
    platform_name: str,
    platform: Platform,
    *,
    privileged: bool,
    host_network: bool,
    volume_mounts: Sequence[str],
    provided_mounts: Sequence[str],
) -> list[tuple[str, str]]:
    """Refuse what the platform does not allow; return the host mounts as (src, dest) paths.

    ``volume_mounts`` are the task's ``src[:dest]`` entries (dest defaults to src);
    ``provided_mounts`` are the platform template's :func:`default_mounts`.
    """
    if privileged and not platform.privileged_allowed:
        raise UserError(
            f"Task with platform: {platform_name} does not have privileged flag enabled. "
            f"Task {task}"
        )
    if host_network and not platform.host_network_allowed:
        raise UserError(
            f"Task with platform: {platform_name} does not have hostNetwork flag enabled. "
            f"Task {task}"
        )
    allowed = {normalise_path(path) for path in platform.allowed_mounts}
    provided = {normalise_path(path) for path in provided_mounts}
    result: list[tuple[str, str]] = []
    for entry in volume_mounts:
        given, destination = _split_mount(entry)
        source = normalise_path(given)
        if source not in allowed and source in provided:
            raise UserError(
                f"Mount {given} is already provided by platform {platform_name} and cannot "
                f"be set in volumeMounts. Remove it from the task spec. Task {task}"
            )
        if source not in allowed:
            raise UserError(
                f"Task with platform: {platform_name} does not allow mount: {given}. Task {task}"
            )
        result.append((source, normalise_path(destination)))
    return result


def _split_mount(entry: str) -> tuple[str, str]:
    """``src[:dest]`` as (src, dest), both checked to be absolute and free of ``..``."""
    if not isinstance(entry, str):
        raise UserError(f"Invalid task volume mount: {entry!r}. Write it as src or src:dest.")
    parts = entry.split(":")
    if len(parts) > 2 or not all(parts):
        raise UserError(f"Invalid task volume mount: {entry}.")
    for path in parts:
        if not path.startswith("/"):
            raise UserError(
                f"Invalid task volume mount: {entry}. {path!r} is not an absolute path; "
                "write it from the root, e.g. /data."
            )
        if ".." in path.split("/"):
            raise UserError(
                f"Invalid task volume mount: {entry}. {path!r} contains '..'; "
                "write the path without it."
            )
    return parts[0], parts[-1]


def normalise_path(path: str) -> str:
    """``path`` without trailing, doubled or ``.`` separators: ``/data//x/./`` is ``/data/x``."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    joined = "/".join(parts)
    return f"/{joined}" if path.startswith("/") else joined
