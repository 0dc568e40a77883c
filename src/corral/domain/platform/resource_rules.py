"""Resource validation rules (docs/resource_validation.md): checking a task's request against
RESOURCE_VALIDATION.

A rule compares two rendered operands. Static rules use only the task's variables and are
checked once; node rules use a node's ``K8_*`` values and pass when one node satisfies them all.

Fixes over OSMO: ``NE`` works; operands compare as Kubernetes quantities (``500m`` < ``1``,
``1Gi`` > ``1G``) and may be arithmetic (``{{K8_MEMORY}} * 0.8``); a missing value or a text
where a number is needed is a clear user error, not a 500; ``assert_message`` is rendered only
when the rule fails; an unknown ``K8_`` name (``K8_GPU_PRODUCT``) is refused by name.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import meta

from corral.domain.configs.models import ResourceRule
from corral.domain.formats.quantities import evaluate_arithmetic, parse_quantity
from corral.domain.jinja.rendering import MissingVariableError, render_text
from corral.domain.platform.nodes import NodeCapacity, node_variables
from corral.errors import UserError

NODE_VARIABLES = ("K8_CPU", "K8_GPU", "K8_MEMORY", "K8_STORAGE")
_NODE_PREFIX = "K8_"
#: Rows of distinct node capacities listed when no node fits.
MAX_ROWS = 20

_COMPARISONS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "GT": (">", operator.gt),
    "GE": (">=", operator.ge),
    "LT": ("<", operator.lt),
    "LE": ("<=", operator.le),
    "EQ": ("==", operator.eq),
    "NE": ("!=", operator.ne),
}
_ORDERING = ("GT", "GE", "LT", "LE")
_NUMBER_START = re.compile(r"[+-]?\.?[0-9]")

# Only parsed, never rendered: finding names needs no sandbox.
_PARSER = jinja2.Environment()


@dataclass(frozen=True)
class NamedRule:
    """A rule with the set it comes from and its position there (0-based), for messages."""

    set_name: str
    index: int
    rule: ResourceRule

    @property
    def label(self) -> str:
        return f"resource validation {self.set_name} rule {self.index + 1}"


@dataclass(frozen=True)
class _Operand:
    template: str
    text: str  # rendered, without surrounding whitespace
    number: Decimal | None  # None: not a number or quantity, compared as text


# ---------------------------------------------------------------------------- classification


def is_node_rule(rule: NamedRule | ResourceRule) -> bool:
    """Whether an operand of ``rule`` uses a node value (``K8_CPU`` ...).

    Names are found in Jinja's syntax tree, so ``{{ USER_CPU }} {{K8_CPU}}`` is a node rule
    (OSMO only looks at the first ``{{...}}``). Any other ``K8_`` name is a UserError.
    """
    named = rule if isinstance(rule, NamedRule) else None
    plain = rule.rule if isinstance(rule, NamedRule) else rule
    label = named.label if named else "resource validation rule"
    operands: set[str] = set()
    for field in ("left_operand", "right_operand"):
        operands |= _referenced(getattr(plain, field), label, field)
    used = operands | _referenced(plain.assert_message, label, "assert_message")
    unknown = sorted(n for n in used if n.startswith(_NODE_PREFIX) and n not in NODE_VARIABLES)
    if unknown:
        verb = "is not a node variable" if len(unknown) == 1 else "are not node variables"
        raise UserError(
            f"{label}: {', '.join(unknown)} {verb}; the node variables are "
            f"{', '.join(NODE_VARIABLES)}. Change the rule to use one of them."
        )
    return any(name in NODE_VARIABLES for name in operands)


def _referenced(text: str, label: str, field: str) -> frozenset[str]:
    try:
        return _names(text)
    except Exception as err:  # syntax error, or nesting deep enough to exhaust the parser
        raise UserError(f"{label} ({field}): {text!r} is not a valid template: {err}") from None


@lru_cache(maxsize=4096)
def _names(text: str) -> frozenset[str]:
    return frozenset(meta.find_undeclared_variables(_PARSER.parse(text)))


def split_rules(rules: Sequence[NamedRule]) -> tuple[list[NamedRule], list[NamedRule]]:
    """The rules split into (static, node), each in the given order."""
    static: list[NamedRule] = []
    node: list[NamedRule] = []
    for named in rules:
        (node if is_node_rule(named) else static).append(named)
    return static, node


# -------------------------------------------------------------------------------- evaluation


def rule_failure(named: NamedRule, variables: Mapping[str, Any]) -> str | None:
    """None when the rule holds with ``variables``; else its rendered ``assert_message``.

    Raises UserError (MissingVariableError for a value that is missing or null) when an
    operand cannot be evaluated.
    """
    left = _operand(named, "left", variables)
    right = _operand(named, "right", variables)
    if _holds(named, left, right):
        return None
    return _failure_message(named, left, right, variables)


def _operand(named: NamedRule, side: str, variables: Mapping[str, Any]) -> _Operand:
    where = f"{named.label} ({side} operand)"
    template = named.rule.left_operand if side == "left" else named.rule.right_operand
    text = render_text(template, variables, where=where).strip()
    try:
        number = evaluate_arithmetic(text)
    except ValueError as err:
        raise UserError(f"{where}: {err}") from None
    return _Operand(template, text, number)


def _holds(named: NamedRule, left: _Operand, right: _Operand) -> bool:
    name = named.rule.operator
    if name not in _COMPARISONS:
        raise UserError(f"{named.label}: unknown operator {name!r}; use one of GT GE LT LE EQ NE")
    compare = _COMPARISONS[name][1]
    if left.number is not None and right.number is not None:
        return compare(left.number, right.number)
    if name not in _ORDERING:
        return compare(left.text, right.text)
    side, operand = ("left", left) if left.number is None else ("right", right)
    raise UserError(
        f"{named.label}: {name} needs a number or quantity (such as 4, 500m or 16Gi) on both "
        f"sides, but the {side} operand {_shown(operand)}"
        f"{_quantity_hint(operand.text)}. Give it a numeric value or change the rule."
    )


def _shown(operand: _Operand) -> str:
    if operand.template.strip() == operand.text:
        return f"is {operand.text!r}"
    return f"{operand.template!r} renders to {operand.text!r}"


def _quantity_hint(text: str) -> str:
    """Why a text that looks like a number is not a quantity (``4K``: use k or Ki)."""
    if _NUMBER_START.match(text) is None:
        return ""
    try:
        parse_quantity(text)
    except ValueError as err:
        return f" ({err})"
    return ""


def _failure_message(
    named: NamedRule, left: _Operand, right: _Operand, variables: Mapping[str, Any]
) -> str:
    where = f"{named.label} (assert_message)"
    try:
        return render_text(named.rule.assert_message, variables, where=where)
    except UserError as err:
        symbol = _COMPARISONS[named.rule.operator][0]
        return (
            f"{named.label} failed ({left.text} {symbol} {right.text} is false), and its "
            f"assert_message could not be rendered: {err.message}"
        )


# ---------------------------------------------------------------------------------- checking


def check_static_rules(task: str, rules: Sequence[NamedRule], variables: Mapping[str, Any]) -> None:
    """Check every rule that uses no node value, in order; the first failure is a UserError."""
    static, _ = _split_for_task(task, rules)
    for named in static:
        message = _evaluate(task, named, variables)
        if message is not None:
            raise UserError(
                f"Resource validation failed for task: {task}\n"
                f"Assertion failed for task {task}: {message}"
            )


def check_node_rules(
    task: str,
    pool: str,
    platform: str,
    rules: Sequence[NamedRule],
    variables: Mapping[str, Any],
    nodes: Sequence[NodeCapacity],
) -> None:
    """Pass when at least one node satisfies every node rule (none: nothing to check).

    Otherwise a UserError with a table of the nodes and why each one does not fit.
    """
    _, node_rules = _split_for_task(task, rules)
    if not node_rules:
        return
    if not nodes:
        raise UserError(f"There are no resources in platform {platform} and pool {pool}!")
    # Nodes of one platform are mostly alike: evaluate each distinct capacity once, and list
    # alike nodes as one row.
    alike: dict[tuple[str, ...], list[str]] = {}
    reasons: dict[tuple[str, ...], str] = {}
    for capacity in nodes:
        values = node_variables(capacity)
        key = tuple(values[name] for name in ("K8_CPU", "K8_MEMORY", "K8_STORAGE", "K8_GPU"))
        if key not in reasons:
            reason = _first_failure(task, node_rules, {**variables, **values})
            if reason is None:
                return
            reasons[key] = " ".join(reason.split("\n"))
        alike.setdefault(key, []).append(capacity.name)
    rows = [[_node_names(alike[key]), *key, reasons[key]] for key in list(alike)[:MAX_ROWS]]
    more = sum(len(names) for names in list(alike.values())[MAX_ROWS:])
    footer = f"... and {more} more nodes\n" if more else ""
    raise UserError(
        f"Resource validation failed for task: {task}\n"
        f"{format_table(['node', 'cpu', 'memory', 'storage', 'gpu', 'reason'], rows)}\n"
        f"{footer}"
        'Please check available resources with "corral resource list".'
    )


def _node_names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} alike)"


def _split_for_task(
    task: str, rules: Sequence[NamedRule]
) -> tuple[list[NamedRule], list[NamedRule]]:
    try:
        return split_rules(rules)
    except UserError as err:
        raise UserError(_for_task(task, err.message)) from None


def _first_failure(
    task: str, rules: Sequence[NamedRule], variables: Mapping[str, Any]
) -> str | None:
    for named in rules:
        message = _evaluate(task, named, variables)
        if message is not None:
            return message
    return None


def _evaluate(task: str, named: NamedRule, variables: Mapping[str, Any]) -> str | None:
    """``rule_failure``, with errors saying which task was being checked."""
    try:
        return rule_failure(named, variables)
    except MissingVariableError as err:
        raise MissingVariableError(_for_task(task, err.message), variable=err.variable) from None
    except UserError as err:
        raise UserError(_for_task(task, err.message)) from None


def _for_task(task: str, message: str) -> str:
    return f"Resource validation failed for task: {task}\n{message}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width text table: a header, a rule of dashes, then the rows; no trailing blanks."""
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
