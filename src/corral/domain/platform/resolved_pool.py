"""What a pool's platform resolves to: merged templates, defaults, rules, group templates.

This is the one place that follows a pool's references into the other config types, for the
submission pipeline, ``pool render`` and the verbose pool view alike.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.domain.configs.models import Platform, Pool
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.resource_rules import NamedRule
from corral.domain.platform.security import default_mounts
from corral.domain.platform.template_merge import MergedTemplate, merge, merge_into
from corral.domain.platform.variables import default_variables
from corral.errors import ConflictError, NotFoundError, UserError


@dataclass(frozen=True)
class GroupTemplate:
    """A merged group template and the names of the templates it was merged from."""

    sources: tuple[str, ...]
    manifest: dict[str, Any]

    @property
    def kind_key(self) -> tuple[str, str, str]:
        return (
            self.manifest["apiVersion"],
            self.manifest["kind"],
            self.manifest["metadata"]["name"],
        )


@dataclass
class ResolvedPlatform:
    pool_name: str
    platform_name: str
    pool: Pool
    platform: Platform
    pod_template: MergedTemplate
    default_variables: dict[str, Any]
    rules: list[NamedRule]
    group_templates: list[GroupTemplate]

    @property
    def node_selector(self) -> dict[str, Any]:
        """The platform's node labels: ``spec.nodeSelector`` of its merged template."""
        return dict(spec_field(self.pod_template.value, "nodeSelector", dict))

    @property
    def tolerations(self) -> list[Any]:
        return list(spec_field(self.pod_template.value, "tolerations", list))

    @property
    def default_mounts(self) -> list[str]:
        return default_mounts(self.pod_template.value)


def spec_field(pod: Mapping[str, Any], name: str, kind: type[dict[str, Any] | list[Any]]) -> Any:
    """``spec.<name>`` of a pod (template) when it has the shape Kubernetes wants, else an
    empty one (a template may hold or render anything; the schema checks report it)."""
    spec = pod.get("spec")
    found = spec.get(name) if isinstance(spec, dict) else None
    return found if isinstance(found, kind) else kind()


def pool_of(configs: Configs, pool_name: str) -> Pool:
    """The pool ``pool_name``; NotFoundError if there is none."""
    return configs.pool(pool_name)


def pool_pod_template(configs: Configs, pool: Pool) -> MergedTemplate:
    """The pool's ``common_pod_template`` merged in order (OSMO's ``parsed_pod_template``)."""
    return merged_pod_templates(configs, pool.common_pod_template)


def merged_pod_templates(configs: Configs, names: Sequence[str]) -> MergedTemplate:
    """The pod templates ``names`` merged in order."""
    merged = MergedTemplate()
    for name in names:
        merge_into(merged, name, _pod_template(configs, name))
    return merged


def platform_template_names(pool: Pool, platform: str) -> tuple[str, ...]:
    """The pod templates a platform's pods are made from, in merge order: the pool's common
    ones, then the platform's overrides."""
    return (*pool.common_pod_template, *pool.platforms[platform].override_pod_template)


def platform_name_of(pool_name: str, pool: Pool, platform: str | None) -> str:
    """``platform``, else the pool's default platform; it must exist in the pool."""
    chosen = platform or pool.default_platform
    if not chosen:
        raise ConflictError(
            f"Pool {pool_name} has no default platform; name one of its platforms "
            f"({', '.join(pool.platforms) or 'none defined'})"
        )
    if chosen not in pool.platforms:
        raise NotFoundError(
            f"Platform {chosen} does not exist in pool {pool_name}! Its platforms: "
            f"{', '.join(pool.platforms) or 'none'}"
        )
    return chosen


def resolve_platform(
    configs: Configs, pool_name: str, platform: str | None = None
) -> ResolvedPlatform:
    """Everything the pool and one of its platforms (default: the pool's default) define."""
    pool = pool_of(configs, pool_name)
    platform_name = platform_name_of(pool_name, pool, platform)
    platform_config = pool.platforms[platform_name]
    merged = merged_pod_templates(configs, platform_template_names(pool, platform_name))
    rule_sets = [*pool.common_resource_validations, *platform_config.resource_validations]
    return ResolvedPlatform(
        pool_name=pool_name,
        platform_name=platform_name,
        pool=pool,
        platform=platform_config,
        pod_template=merged,
        default_variables=default_variables(
            pool.common_default_variables, platform_config.default_variables
        ),
        rules=named_rules(configs, rule_sets),
        group_templates=merged_group_templates(configs, pool.common_group_templates),
    )


def named_rules(configs: Configs, set_names: list[str]) -> list[NamedRule]:
    """The rules of the named sets, concatenated in order (no de-duplication, as OSMO)."""
    return [
        NamedRule(set_name, index, rule)
        for set_name in set_names
        for index, rule in enumerate(configs.rules(set_name))
    ]


def merged_group_templates(configs: Configs, names: list[str]) -> list[GroupTemplate]:
    """Merge by (apiVersion, kind, metadata.name) in list order; first-seen order is kept."""
    stored = configs.get(ConfigType.GROUP_TEMPLATE, {})
    merged: dict[tuple[str, str, str], GroupTemplate] = {}
    for name in names:
        if name not in stored:
            raise UserError(f"Group template {name} does not exist!")
        template = GroupTemplate((name,), copy.deepcopy(stored[name]))
        key = template.kind_key
        if key in merged:
            earlier = merged[key]
            template = GroupTemplate(
                (*earlier.sources, name), merge(earlier.manifest, stored[name])
            )
        merged[key] = template
    return list(merged.values())


def _pod_template(configs: Configs, name: str) -> dict[str, Any]:
    templates = configs.get(ConfigType.POD_TEMPLATE, {})
    if name not in templates:
        raise UserError(f"Pod template {name} does not exist!")
    return dict(templates[name])


def verbose_pool(configs: Configs, pool_name: str) -> dict[str, Any]:
    """OSMO's verbose pool view: the stored pool plus every derived ``parsed_*`` field."""
    pool = pool_of(configs, pool_name)
    view: dict[str, Any] = {
        **pool.model_dump(mode="json"),
        "name": pool_name,
        "status": "MAINTENANCE" if pool.enable_maintenance else "ONLINE",
        "parsed_pod_template": pool_pod_template(configs, pool).value,
        "parsed_resource_validations": _rule_dicts(
            named_rules(configs, pool.common_resource_validations)
        ),
        "parsed_group_templates": [
            template.manifest
            for template in merged_group_templates(configs, pool.common_group_templates)
        ],
    }
    for platform_name in pool.platforms:
        resolved = resolve_platform(configs, pool_name, platform_name)
        view["platforms"][platform_name].update(
            parsed_pod_template=resolved.pod_template.value,
            parsed_resource_validations=_rule_dicts(resolved.rules),
            tolerations=resolved.tolerations,
            labels=resolved.node_selector,
            default_mounts=resolved.default_mounts,
        )
    return view


def _rule_dicts(rules: list[NamedRule]) -> list[dict[str, Any]]:
    return [rule.rule.model_dump() for rule in rules]
