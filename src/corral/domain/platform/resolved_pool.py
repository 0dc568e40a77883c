"""What a pool's platform resolves to: merged templates, defaults, rules, group templates.

This is the one place that follows a pool's references into the other config types, for the
submission pipeline, ``pool render`` and the verbose pool view alike.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.domain.configs.models import ResourceRule
from corral.domain.configs.types import ConfigType
from corral.domain.platform.resource_rules import NamedRule
from corral.domain.platform.security import default_mounts
from corral.domain.platform.template_merge import MergedTemplate, merge, merge_into
from corral.domain.platform.variables import default_variables
from corral.errors import NotFoundError, UserError

State = Mapping[ConfigType, Mapping[str, Any]]


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
    pool: Mapping[str, Any]
    platform: Mapping[str, Any]
    pod_template: MergedTemplate
    default_variables: dict[str, Any]
    rules: list[NamedRule]
    group_templates: list[GroupTemplate]

    @property
    def node_selector(self) -> dict[str, Any]:
        """The platform's node labels: ``spec.nodeSelector`` of its merged template."""
        selector = self.pod_template.value.get("spec", {}).get("nodeSelector", {})
        return dict(selector) if isinstance(selector, dict) else {}

    @property
    def tolerations(self) -> list[Any]:
        tolerations = self.pod_template.value.get("spec", {}).get("tolerations", [])
        return list(tolerations) if isinstance(tolerations, list) else []

    @property
    def default_mounts(self) -> list[str]:
        return default_mounts(self.pod_template.value)


def pool_of(state: State, pool_name: str) -> Mapping[str, Any]:
    pools: Mapping[str, Mapping[str, Any]] = state.get(ConfigType.POOL, {})
    if pool_name not in pools:
        raise NotFoundError(f"Pool {pool_name} not found.")
    return pools[pool_name]


def pool_pod_template(state: State, pool: Mapping[str, Any]) -> MergedTemplate:
    """The pool's ``common_pod_template`` merged in order (OSMO's ``parsed_pod_template``)."""
    merged = MergedTemplate()
    for name in pool.get("common_pod_template", []):
        merge_into(merged, name, _pod_template(state, name))
    return merged


def platform_name_of(pool_name: str, pool: Mapping[str, Any], platform: str | None) -> str:
    """``platform``, else the pool's default platform; it must exist in the pool."""
    chosen = platform or pool.get("default_platform")
    if not chosen:
        raise UserError(
            f"Pool {pool_name} has no default platform; name one of its platforms "
            f"({', '.join(pool.get('platforms', {})) or 'none defined'})"
        )
    if chosen not in pool.get("platforms", {}):
        raise UserError(
            f"Platform {chosen} does not exist in pool {pool_name}! Its platforms: "
            f"{', '.join(pool.get('platforms', {})) or 'none'}"
        )
    return str(chosen)


def resolve_platform(state: State, pool_name: str, platform: str | None = None) -> ResolvedPlatform:
    """Everything the pool and one of its platforms (default: the pool's default) define."""
    pool = pool_of(state, pool_name)
    platform_name = platform_name_of(pool_name, pool, platform)
    platform_config = pool["platforms"][platform_name]
    merged = pool_pod_template(state, pool)
    for name in platform_config.get("override_pod_template", []):
        merge_into(merged, name, _pod_template(state, name))
    rule_sets = [*pool.get("common_resource_validations", [])]
    rule_sets += platform_config.get("resource_validations", [])
    return ResolvedPlatform(
        pool_name=pool_name,
        platform_name=platform_name,
        pool=pool,
        platform=platform_config,
        pod_template=merged,
        default_variables=default_variables(
            pool.get("common_default_variables", {}), platform_config.get("default_variables", {})
        ),
        rules=named_rules(state, rule_sets),
        group_templates=merged_group_templates(state, pool.get("common_group_templates", [])),
    )


def named_rules(state: State, set_names: list[str]) -> list[NamedRule]:
    """The rules of the named sets, concatenated in order (no de-duplication, as OSMO)."""
    sets = state.get(ConfigType.RESOURCE_VALIDATION, {})
    rules: list[NamedRule] = []
    for set_name in set_names:
        if set_name not in sets:
            raise UserError(f"Resource validation {set_name} does not exist!")
        for index, rule in enumerate(sets[set_name]):
            rules.append(NamedRule(set_name, index, ResourceRule.model_validate(rule)))
    return rules


def merged_group_templates(state: State, names: list[str]) -> list[GroupTemplate]:
    """Merge by (apiVersion, kind, metadata.name) in list order; first-seen order is kept."""
    stored = state.get(ConfigType.GROUP_TEMPLATE, {})
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


def _pod_template(state: State, name: str) -> dict[str, Any]:
    templates = state.get(ConfigType.POD_TEMPLATE, {})
    if name not in templates:
        raise UserError(f"Pod template {name} does not exist!")
    return dict(templates[name])


def verbose_pool(state: State, pool_name: str) -> dict[str, Any]:
    """OSMO's verbose pool view: the stored pool plus every derived ``parsed_*`` field."""
    pool = pool_of(state, pool_name)
    view: dict[str, Any] = {
        **copy.deepcopy(dict(pool)),
        "name": pool_name,
        "status": "MAINTENANCE" if pool.get("enable_maintenance") else "ONLINE",
        "parsed_pod_template": pool_pod_template(state, pool).value,
        "parsed_resource_validations": _rule_dicts(
            named_rules(state, pool.get("common_resource_validations", []))
        ),
        "parsed_group_templates": [
            template.manifest
            for template in merged_group_templates(state, pool.get("common_group_templates", []))
        ],
    }
    for platform_name in pool.get("platforms", {}):
        resolved = resolve_platform(state, pool_name, platform_name)
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
