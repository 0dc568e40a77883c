"""The permissions the Kubernetes backend needs, as RBAC rules (docs/deploy.md#permissions).

The same rules are granted by ``deploy/kubernetes`` and checked at run time with
``SelfSubjectAccessReview`` before a group's objects are made, so a missing one is reported with
the exact rule to add, in the shape of OSMO's ``extraRBACRules`` Helm value
(docs/osmo-reference.md#osmos-rbac-rules-for-extra-kinds).
"""

from __future__ import annotations

from corral.backends.port import Rule

#: What a group-template kind needs at least
#: (docs/osmo-reference.md#osmos-rbac-rules-for-extra-kinds: list and patch for label injection and
#: cleanup tracking, create and delete to make and remove the object).
GROUP_TEMPLATE_VERBS = ("create", "delete", "list", "patch")
#: Watching and reading back what was made.
_READ_VERBS = ("get", "list", "watch")
_WRITE_VERBS = ("create", "delete", "patch", "update")

#: Granted in the workflow namespace (a Role): a group's own objects.
NAMESPACED_RULES: tuple[Rule, ...] = (
    Rule(("",), ("pods", "services", "secrets"), (*_READ_VERBS, *_WRITE_VERBS)),
    Rule(("",), ("pods/log",), ("get",)),
    Rule(("scheduling.run.ai",), ("podgroups",), (*_READ_VERBS, *_WRITE_VERBS)),
)

#: Cordoning, draining and uncordoning a Node (docs/health.md).
NODE_PATCH_RULE = Rule(("",), ("nodes",), ("patch",))

#: Reading the NVIDIA DRA driver's ComputeDomains: their IMEX status is a fabric health source.
COMPUTE_DOMAIN_READ_RULE = Rule(("resource.nvidia.com",), ("computedomains",), _READ_VERBS)

#: Granted cluster-wide (a ClusterRole): capacity, and KAI's cluster-scoped queues/topologies.
CLUSTER_RULES: tuple[Rule, ...] = (
    Rule(("",), ("nodes",), _READ_VERBS),
    NODE_PATCH_RULE,
    COMPUTE_DOMAIN_READ_RULE,
    Rule(("",), ("pods",), _READ_VERBS),
    Rule(("scheduling.run.ai",), ("queues",), (*_READ_VERBS, *_WRITE_VERBS)),
    Rule(("kai.scheduler",), ("topologies",), (*_READ_VERBS, *_WRITE_VERBS)),
    Rule(("scheduling.k8s.io",), ("priorityclasses",), ("get",)),
    Rule(("authorization.k8s.io",), ("selfsubjectaccessreviews",), ("create",)),
)


def group_template_rule(api_group: str, resource: str) -> Rule:
    """The rule a group template of ``resource`` (plural, in ``api_group``) needs."""
    return Rule((api_group,), (resource,), GROUP_TEMPLATE_VERBS)
