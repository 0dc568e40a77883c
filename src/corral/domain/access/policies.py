"""Role policy evaluation, pool access and IdP group → role mapping (docs/access.md).

A request is a semantic action (``workflow:Create``) and a resource (``pool/team-a``) or ``None``
for global actions. Matching follows OSMO:

* action: exact, ``*``/``*:*`` any, ``<type>:*`` any action of the type, ``*:<Verb>`` that verb;
* resource: a global request (``None`` or ``""``) matches any policy of the action; a
  scoped request names one resource, and needs a pattern that is ``*``, equal, ``prefix/*``
  (anything under ``prefix/``) or ``prefix*`` (string prefix: ``pool/team*``). A request is
  never a pattern: one that names ``pool/*`` is denied. (OSMO matched a wildcard request
  against any pattern under its prefix, so ``node:Update`` on one pool, even one that does not
  exist, passed a check on ``pool/*``: docs/access.md#differences-from-osmo);
* a policy with no ``resources`` matches global requests only — the documented rule; corral does not
  copy OSMO's DB-mode startup rewrite that widens it to ``*``
  (docs/access.md#differences-from-osmo);
* a Deny in any role wins; otherwise one Allow suffices; otherwise the request is denied.

Legacy actions (``{base, path, method}``, at the role's top level as old roles write them,
docs/osmo-reference.md#legacy-role-actions, or inside a policy) are converted through
:mod:`corral.domain.access.actions`; they keep the scope their path names (``/api/pool/shared*``
grants ``pool/shared*``), unless their policy lists ``resources``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from corral.domain.access.actions import legacy_grants
from corral.domain.configs.defaults import initial_bundle
from corral.domain.configs.role_models import LegacyAction, Role, RolePolicy

UNREGISTERED = ""  # the action of a request the registry does not know; only `*:*` grants it
DEFAULT_ROLE = "osmo-default"


def default_roles() -> list[Role]:
    """corral's built-in roles (``corral.domain.configs.defaults``), as models."""
    roles = initial_bundle()["roles"]
    return [Role.model_validate({"name": name, **body}) for name, body in roles.items()]


DEFAULT_ROLE_NAMES: tuple[str, ...] = tuple(role.name for role in default_roles())


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass(frozen=True)
class Rule:
    """One effective policy: semantic actions only, labelled for the decision's reason."""

    effect: Literal["Allow", "Deny"]
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    label: str


# -------------------------------------------------------------------------------- matching


def action_matches(pattern: str, action: str) -> bool:
    """Whether the policy action ``pattern`` covers the requested ``action``."""
    if pattern in ("*", "*:*"):
        return True
    if action == UNREGISTERED:
        return False
    if pattern == action:
        return True
    kind, _, verb = pattern.partition(":")
    want_kind, _, want_verb = action.partition(":")
    return kind in ("*", want_kind) and verb in ("*", want_verb)


def is_global(resource: str | None) -> bool:
    """A request without a resource (``None`` or ``""``): any policy of the action matches."""
    return resource is None or resource == ""


def resource_matches(pattern: str, resource: str) -> bool:
    """Whether the policy resource ``pattern`` covers the scoped ``resource``."""
    if is_pattern(resource):
        return False  # a request names one resource
    if pattern in ("*", resource):
        return True
    return pattern.endswith("*") and resource.startswith(pattern[:-1])  # "prefix/*", "prefix*"


def is_pattern(resource: str) -> bool:
    """Whether ``resource`` is a pattern (it has a ``*``): what a policy may name, never a
    request."""
    return "*" in resource


def _rule_resource(rule: Rule, resource: str | None) -> str | None:
    """The pattern through which ``rule`` covers ``resource`` (``""`` for a global request)."""
    if resource is None or is_global(resource):
        return ""
    return next((p for p in rule.resources if resource_matches(p, resource)), None)


def _describe(rule: Rule, action: str, resource: str | None) -> str | None:
    """``"<effect> <action pattern> on <resource pattern>"`` if ``rule`` matches, else None."""
    matched = next((a for a in rule.actions if action_matches(a, action)), None)
    scope = _rule_resource(rule, resource)
    if matched is None or scope is None:
        return None
    return f"{rule.effect} {matched}" + (f" on {scope}" if scope else " (global action)")


# --------------------------------------------------------------------------- effective rules


def _policy_rules(policy: RolePolicy, label: str) -> list[Rule]:
    semantic = tuple(a for a in policy.actions if isinstance(a, str))
    rules = [Rule(policy.effect, semantic, tuple(policy.resources), label)] if semantic else []
    legacy = [a for a in policy.actions if isinstance(a, LegacyAction)]
    for action in legacy:
        rules += _legacy_rules(action, policy.effect, label, tuple(policy.resources))
    return rules


def _legacy_rules(
    action: LegacyAction,
    effect: Literal["Allow", "Deny"],
    label: str,
    resources: tuple[str, ...] = (),
) -> list[Rule]:
    where = f"{label} legacy {action.method} {action.path}"
    return [
        Rule(effect, (name,), resources or (resource,), where)
        for name, resource in legacy_grants(action)
    ]


def role_rules(role: Role) -> list[Rule]:
    """The role's policies as semantic rules, legacy actions converted."""
    rules: list[Rule] = []
    for index, policy in enumerate(role.policies, start=1):
        rules += _policy_rules(policy, f"policy {index}")
    for index, action in enumerate(role.actions or [], start=1):
        rules += _legacy_rules(action, "Allow", f"action {index}")
    return rules


# ------------------------------------------------------------------------------ evaluation


def _target(action: str, resource: str | None) -> str:
    name = action or "an unregistered request"
    return name if is_global(resource) else f"{name} on {resource}"


def _first_match(
    role: Role, action: str, resource: str | None, effect: Literal["Allow", "Deny"]
) -> str | None:
    for rule in role_rules(role):
        described = _describe(rule, action, resource) if rule.effect == effect else None
        if described is not None:
            return f"role '{role.name}' {rule.label}: {described}"
    return None


def evaluate(roles: Sequence[Role], action: str, resource: str | None = None) -> Decision:
    """Whether ``roles`` together may do ``action`` on ``resource``; a Deny anywhere wins."""
    if resource and is_pattern(resource):
        return Decision(False, f"denied: {resource} is a pattern; a request names one resource")
    for role in roles:
        denied = _first_match(role, action, resource, "Deny")
        if denied is not None:
            return Decision(False, f"denied by {denied}")
    for role in roles:
        allowed = _first_match(role, action, resource, "Allow")
        if allowed is not None:
            return Decision(True, f"allowed by {allowed}")
    if not roles:
        return Decision(False, f"denied: no roles, so nothing allows {_target(action, resource)}")
    names = ", ".join(role.name for role in roles)
    return Decision(False, f"denied: no policy of {names} allows {_target(action, resource)}")


def allowed_pools(roles: Sequence[Role], pool_names: Iterable[str]) -> list[str]:
    """The pools ``roles`` may submit to (``workflow:Create`` on ``pool/<name>``), in order.

    Unlike OSMO's ``GetAllowedPools``, a Deny in any role hides the pool, so the list shows exactly
    the pools a submission would be accepted for (docs/access.md#differences-from-osmo)."""
    rules = [
        rule
        for role in roles
        for rule in role_rules(role)
        if any(action_matches(a, "workflow:Create") for a in rule.actions)
    ]
    denied = _Patterns.of(rule for rule in rules if rule.effect == "Deny")
    allowed = _Patterns.of(rule for rule in rules if rule.effect == "Allow")
    if denied.empty and allowed.covers_prefix("pool/"):  # pool/* (or *): every pool, at once
        return [name for name in pool_names if not is_pattern(name)]
    # evaluate() per pool, with the rules' patterns worked out once (it was 55 µs a pool: a
    # quarter of a second for a list of 5,000 pools).
    return [
        name
        for name in pool_names
        if not is_pattern(resource := f"pool/{name}")
        and not denied.cover(resource)
        and allowed.cover(resource)
    ]


@dataclass(frozen=True)
class _Patterns:
    """The resource patterns of some rules, as :func:`resource_matches` reads them."""

    everything: bool
    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @staticmethod
    def of(rules: Iterable[Rule]) -> _Patterns:
        patterns = [pattern for rule in rules for pattern in rule.resources]
        return _Patterns(
            "*" in patterns,
            frozenset(patterns),
            tuple(pattern[:-1] for pattern in patterns if pattern.endswith("*")),
        )

    def cover(self, resource: str) -> bool:
        return self.everything or resource in self.exact or resource.startswith(self.prefixes)

    @property
    def empty(self) -> bool:
        return not self.exact

    def covers_prefix(self, prefix: str) -> bool:
        """Whether every resource that starts with ``prefix`` is covered."""
        return self.everything or any(prefix.startswith(p) for p in self.prefixes)


def administers(roles: Sequence[Role], names: Iterable[str]) -> bool:
    """Whether a user holding the role ``names`` may administer corral under ``roles`` (the
    admin-only requests: users, tokens of others; only ``*:*`` grants them)."""
    return evaluate(roles_for_request(roles, names), UNREGISTERED).allowed


def admin_lockout(
    before: Sequence[Role], after: Sequence[Role], holders: Sequence[tuple[str, Sequence[str]]]
) -> str | None:
    """Why roles changed from ``before`` to ``after`` would leave none of ``holders`` (user
    name, role names) able to administer corral, when one was; None when one still is, or
    none was. A role write that did so answered 200, and every admin got 403 from then on."""
    admins = [name for name, names in holders if administers(before, names)]
    if not admins or any(administers(after, names) for _, names in holders):
        return None
    shown = ", ".join(admins[:5]) + (f" and {len(admins) - 5} more" if len(admins) > 5 else "")
    return (
        f"This change to the roles would leave no user who may administer corral: {shown} "
        "would lose it, and every admin token would stop working. Keep a role that allows "
        "*:* (osmo-admin's policy), or give a user such a role first "
        "(corral user roles add NAME osmo-admin)."
    )


# ------------------------------------------------------------------------ roles per request


def roles_for_request(defined: Sequence[Role], names: Iterable[str]) -> list[Role]:
    """The roles a request acts with: the named ones that exist plus ``osmo-default``
    (docs/access.md)."""
    wanted = {*names, DEFAULT_ROLE}
    return [role for role in defined if role.name in wanted]


def external_names(role: Role) -> set[str]:
    """IdP groups mapped to ``role``: ``None`` → the role's own name, ``[]`` → none."""
    return {role.name} if role.external_roles is None else set(role.external_roles)


def roles_for_groups(
    roles: Sequence[Role], groups: Iterable[str], current_roles: Iterable[str]
) -> list[str]:
    """A user's role names after an IdP login carrying ``groups`` (docs/access.md), sorted.

    A role is mapped from the groups in its ``external_roles``. corral's choice between OSMO's two
    storage modes: ``external_roles: None`` (absent) is the identity mapping — the group named like
    the role — as for a new role in OSMO's DB mode and in file mode; ``[]`` maps no group (DB mode;
    OSMO's file mode reads it as identity, docs/access.md#differences-from-osmo). Then per
    ``sync_mode``: ``import`` adds the role when a mapped group is present and never removes it;
    ``force`` adds it when present and removes it when absent; ``ignore`` never changes it. Current
    roles that are not defined are kept."""
    present = set(groups)
    result = set(current_roles)
    for role in roles:
        mapped = bool(external_names(role) & present)
        if role.sync_mode != "ignore" and mapped:
            result.add(role.name)
        elif role.sync_mode == "force" and not mapped:
            result.discard(role.name)
    return sorted(result)
