"""Every platform of a pool must render, with the pool's default variables, into a Pod (and
its group templates into objects) that the API server would accept: checked when a pool or a
template it uses is written, so that a broken template is refused there and not by every later
submission (docs/templates.md#checked-on-write). This renders templates: the server runs it in
the sandbox (``services/workers/sandbox.py``). The fields of each template alone are checked
when it is parsed (``partial_schema``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.domain.configs.references import Problem
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.formats.json_paths import Path, format_path
from corral.domain.platform.manifests import PodTask, build_pod, drop_imageless_control_container
from corral.domain.platform.render import render_pool, sample_identities
from corral.domain.platform.resolved_pool import resolve_platform
from corral.domain.schemas.objects import manifest_problem_paths
from corral.errors import UserError

# --------------------------------------------------------------------------------- pools


def pool_problems(configs: Configs, pool_names: Sequence[str]) -> list[Problem]:
    """Per pool and platform: whether its templates render, with the pool's default variables,
    into objects the API server accepts. Problems name the platform and the template."""
    found: list[Problem] = []
    pools: Mapping[str, Any] = configs.get(ConfigType.POOL, {})
    for pool_name in pool_names:
        for platform in (pools.get(pool_name) or {}).get("platforms") or {}:
            problem = _platform_problem(configs, pool_name, platform)
            if problem is not None:
                found.append(Problem(ConfigType.POOL, pool_name, ("platforms", platform), problem))
    return found


def _platform_problem(configs: Configs, pool_name: str, platform: str) -> str | None:
    where = f"Platform {platform} does not render with the pool's default variables"
    try:
        view = render_pool(configs, pool_name, platform=platform)
    except UserError as err:
        return f"{where}: {err.message}"
    group, task = sample_identities(pool_name, platform)
    pod = build_pod(PodTask(identity=task, image="sample"), group, view["pod_template"])
    drop_imageless_control_container(pod)
    pod["metadata"]["namespace"] = "default"
    writers = resolve_platform(configs, pool_name, platform).pod_template.writers
    for path, message in manifest_problem_paths(pod):
        return (
            f"{where} into a valid Pod: {format_path(path)}: {message} "
            f"({_written_by(writers, path)}; see corral pool render {pool_name} "
            f"--platform {platform})"
        )
    for entry in view["group_templates"]:
        manifest = {**entry["manifest"]}
        manifest["metadata"] = {**manifest.get("metadata", {}), "namespace": "default"}
        for path, message in manifest_problem_paths(manifest):
            at = f"{format_path(path)}: " if path else ""
            return (
                f"{where} into a valid {manifest.get('kind')}: {at}{message} (group template "
                f"{', '.join(entry['sources'])})"
            )
    return None


def _written_by(writers: Mapping[Path, list[tuple[str, Any]]], path: Path) -> str:
    names = [
        name
        for leaf, writes in writers.items()
        if leaf[: len(path)] == tuple(path) or tuple(path)[: len(leaf)] == leaf
        for name, _ in writes
    ]
    unique = list(dict.fromkeys(names))
    if not unique:
        return "a field corral sets itself"
    return f"pod template {', '.join(unique)}"


def new_pool_problems(before: Configs, after: Configs) -> list[Problem]:
    """The problems of :func:`pool_problems` that a write from ``before`` to ``after`` makes:
    only pools whose inputs changed are rendered, and problems they had already do not count
    (a template used by ten pools can be fixed while an eleventh is broken for its own reason)."""
    changed = affected_pools(before, after)
    known = set(pool_problems(before, [name for name in changed if _pool(before, name)]))
    return [problem for problem in pool_problems(after, changed) if problem not in known]


def affected_pools(before: Configs, after: Configs) -> list[str]:
    """Pools of ``after`` whose own item, or a template or validation set they use, differs."""
    return [
        name
        for name in after.get(ConfigType.POOL, {})
        if _inputs(before, name) != _inputs(after, name)
    ]


def _pool(configs: Configs, name: str) -> Mapping[str, Any] | None:
    found: Mapping[str, Any] | None = configs.get(ConfigType.POOL, {}).get(name)
    return found


def _inputs(configs: Configs, name: str) -> Any:
    pool = _pool(configs, name)
    if pool is None:
        return None
    used: list[tuple[str, str]] = [
        *((ConfigType.POD_TEMPLATE.value, t) for t in pool.get("common_pod_template", [])),
        *((ConfigType.GROUP_TEMPLATE.value, t) for t in pool.get("common_group_templates", [])),
        *(
            (ConfigType.RESOURCE_VALIDATION.value, t)
            for t in pool.get("common_resource_validations", [])
        ),
    ]
    for platform in (pool.get("platforms") or {}).values():
        used += [
            (ConfigType.POD_TEMPLATE.value, t) for t in platform.get("override_pod_template", [])
        ]
        used += [
            (ConfigType.RESOURCE_VALIDATION.value, t)
            for t in platform.get("resource_validations", [])
        ]
    return pool, [(kind, name, configs.get(ConfigType(kind), {}).get(name)) for kind, name in used]
