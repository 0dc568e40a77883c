"""A pod's ``affinity.nodeAffinity``, with Kubernetes' meaning (docs/scheduler.md#node-affinity).

``requiredDuringSchedulingIgnoredDuringExecution`` keeps a pod off every node that matches none
of its ``nodeSelectorTerms`` (the terms are ORed; the expressions and fields of one term are
ANDed; a term with neither matches no node). ``preferredDuringSchedulingIgnoredDuringExecution``
scores a node with the summed ``weight`` of the preferences it matches. Operators: ``In``,
``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt`` and ``Lt`` on labels (``NotIn`` and
``DoesNotExist`` match a node without the label; ``Gt``/``Lt`` compare the label as an
integer, and a label that is not one does not match); ``In`` and ``NotIn`` on the field
``metadata.name``.

The same pod spec goes to a Kubernetes backend, where kube-scheduler's or KAI's NodeAffinity
plugin reads it; the embedded scheduler reads it here, so a template means the same on both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.errors import UserError

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (on a label) or ``matchFields`` (on the node's name) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    on_field: bool = False

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        value = name if self.on_field else labels.get(self.key)
        operator = self.operator
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        number = _integer(value)
        if number is None:
            return False
        bound = int(self.values[0])
        return number > bound if operator == "Gt" else number < bound


@dataclass(frozen=True, slots=True)
class Term:
    """A ``NodeSelectorTerm``: every requirement must hold; without any, no node matches."""

    requirements: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return bool(self.requirements) and all(
            requirement.matches(name, labels) for requirement in self.requirements
        )


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """``required``: the terms a node must match one of (None: no requirement); ``preferred``:
    (weight, term) pairs scoring the nodes that match them."""

    required: tuple[Term, ...] | None = None
    preferred: tuple[tuple[int, Term], ...] = ()

    def allows(self, name: str, labels: Mapping[str, str]) -> bool:
        return self.required is None or any(term.matches(name, labels) for term in self.required)

    def score(self, name: str, labels: Mapping[str, str]) -> int:
        return sum(weight for weight, term in self.preferred if term.matches(name, labels))

    def describe_required(self) -> str:
        """The required terms as a user reads them: ``zone In (a, b) or gpu Exists``."""
        return " or ".join(_term_text(term) for term in self.required or ())


NO_AFFINITY = NodeAffinity()


def read_node_affinity(pod_spec: Mapping[str, Any]) -> NodeAffinity:
    """The node affinity of a rendered pod spec; UserError naming the field for a malformed
    one (Kubernetes' API server would refuse it)."""
    affinity = pod_spec.get("affinity")
    if affinity is None:
        return NO_AFFINITY
    node_affinity = _mapping(affinity, "spec.affinity").get("nodeAffinity")
    if node_affinity is None:
        return NO_AFFINITY
    where = "spec.affinity.nodeAffinity"
    node_affinity = _mapping(node_affinity, where)
    required = node_affinity.get(REQUIRED)
    terms: tuple[Term, ...] | None = None
    if required is not None:
        selector = _mapping(required, f"{where}.{REQUIRED}")
        listed = _list(selector.get("nodeSelectorTerms"), f"{where}.{REQUIRED}.nodeSelectorTerms")
        terms = tuple(
            _term(term, f"{where}.{REQUIRED}.nodeSelectorTerms[{index}]")
            for index, term in enumerate(listed)
        )
    preferred = []
    entries = _list(node_affinity.get(PREFERRED) or [], f"{where}.{PREFERRED}")
    for index, entry in enumerate(entries):
        place = f"{where}.{PREFERRED}[{index}]"
        entry = _mapping(entry, place)
        weight = entry.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise UserError(f"{place}.weight must be an integer from 1 to 100, not {weight!r}")
        preferred.append((weight, _term(entry.get("preference"), f"{place}.preference")))
    return NodeAffinity(terms, tuple(preferred))


def _term(value: Any, where: str) -> Term:
    term = _mapping(value, where)
    requirements = [
        _requirement(entry, f"{where}.matchExpressions[{index}]", on_field=False)
        for index, entry in enumerate(_list(term.get("matchExpressions") or [], where))
    ]
    requirements += [
        _requirement(entry, f"{where}.matchFields[{index}]", on_field=True)
        for index, entry in enumerate(_list(term.get("matchFields") or [], where))
    ]
    return Term(tuple(requirements))


def _requirement(value: Any, where: str, *, on_field: bool) -> Requirement:
    entry = _mapping(value, where)
    key = entry.get("key")
    operator = entry.get("operator")
    values = entry.get("values") or []
    if not isinstance(key, str) or not key:
        raise UserError(f"{where}.key must be a non-empty string, not {key!r}")
    allowed = FIELD_OPERATORS if on_field else OPERATORS
    if operator not in allowed:
        raise UserError(f"{where}.operator must be one of {', '.join(allowed)}, not {operator!r}")
    if on_field and key != NAME_FIELD:
        raise UserError(f"{where}.key: matchFields supports only {NAME_FIELD!r}, not {key!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UserError(f"{where}.values must be a list of strings, not {values!r}")
    if operator in ("In", "NotIn") and not values:
        raise UserError(f"{where}.values must not be empty with operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise UserError(f"{where}.values must be empty with operator {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or _integer(values[0]) is None):
        raise UserError(f"{where}.values must be one integer with operator {operator}")
    return Requirement(key, str(operator), tuple(values), on_field)


def _integer(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be an object, not {value!r}")
    return value


def _list(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list, not {value!r}")
    return value


def _term_text(term: Term) -> str:
    if not term.requirements:
        return "(an empty term, which matches no node)"
    return " and ".join(_requirement_text(r) for r in term.requirements)


def _requirement_text(requirement: Requirement) -> str:
    if requirement.operator in ("Exists", "DoesNotExist"):
        return f"{requirement.key} {requirement.operator}"
    if requirement.operator in ("Gt", "Lt"):
        return f"{requirement.key} {requirement.operator} {requirement.values[0]}"
    return f"{requirement.key} {requirement.operator} ({', '.join(requirement.values)})"
