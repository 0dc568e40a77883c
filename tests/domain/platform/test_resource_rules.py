from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.configs.models import ResourceRule
from corral.domain.configs.types import ConfigType, parse_items
from corral.domain.jinja.rendering import MissingVariableError
from corral.domain.platform.nodes import NodeCapacity
from corral.domain.platform.resource_rules import (
    NamedRule,
    check_node_rules,
    check_static_rules,
    format_table,
    is_node_rule,
    split_rules,
)
from corral.errors import CorralError, UserError
from tests.conftest import REPO

GI = 2**30
FAILED = "Resource validation failed for task: t1\n"
ASSERT = FAILED + "Assertion failed for task t1: "
CHECK = '\nPlease check available resources with "corral resource list".'
MISSING = (
    "variable {name} has no value (it is undefined or null); give it one in the task's "
    "resources, with --set, or as a default variable of the pool or platform"
)
NUMBER_NEEDED = "needs a number or quantity (such as 4, 500m or 16Gi) on both sides, but the"

CPU_NODE = NodeCapacity("cpu-node", Decimal(16), Decimal(64 * GI), Decimal(500 * GI), 0)
GPU_NODE = NodeCapacity("gpu-node", Decimal("63.75"), Decimal(255 * GI), Decimal(2**40), 8)
NODES = [CPU_NODE, GPU_NODE]
NODE_TABLE_HEAD = (
    "node      cpu    memory  storage  gpu  reason\n"
    "--------  -----  ------  -------  ---  {dashes}\n"
)

Spec = tuple[str, str, str, str]


def _rules(*specs: Spec, set_name: str = "limits") -> list[NamedRule]:
    return [
        NamedRule(
            set_name,
            index,
            ResourceRule(
                operator=op, left_operand=left, right_operand=right, assert_message=message
            ),
        )
        for index, (op, left, right, message) in enumerate(specs)
    ]


def _outcome(
    specs: list[Spec], variables: dict[str, Any], nodes: list[NodeCapacity] | None = None
) -> str:
    """'ok', or the error's class and exact message; static rules first, as at submission."""
    rules = _rules(*specs)
    try:
        check_static_rules("t1", rules, variables)
        check_node_rules(
            "t1", "pool-a", "h100", rules, variables, NODES if nodes is None else nodes
        )
    except CorralError as err:
        return f"{type(err).__name__}: {err.message}"
    return "ok"


def _table(*rows: str) -> str:
    width = max(len("reason"), *(len(row.split("  ")[-1]) for row in rows))
    head = NODE_TABLE_HEAD.format(dashes="-" * width)
    return FAILED + head + "\n".join(rows) + CHECK


CASES: list[tuple[str, list[Spec], dict[str, Any], list[NodeCapacity] | None, str]] = [
    # ---------------------------------------------------------------- units, Kubernetes style
    ("Gi is more than G", [("GT", "{{USER_MEMORY}}", "1G", "m")], {"USER_MEMORY": "1Gi"}, None,
     "ok"),
    ("G is less than Gi", [("GE", "{{USER_MEMORY}}", "1Gi", "{{USER_MEMORY}} < 1Gi")],
     {"USER_MEMORY": "1G"}, None, "UserError: " + ASSERT + "1G < 1Gi"),
    ("Mi equals 1024 Ki", [("EQ", "1Mi", "{{USER_MEMORY}}", "m")], {"USER_MEMORY": "1024Ki"},
     None, "ok"),
    ("M is 10^6", [("EQ", "{{USER_MEMORY}}", "1000k", "m")], {"USER_MEMORY": "1M"}, None, "ok"),
    ("M is less than Mi", [("LT", "1M", "1Mi", "m")], {}, None, "ok"),
    ("Ki against k", [("GT", "1Ki", "1k", "m")], {}, None, "ok"),
    ("1024Mi is 1Gi", [("EQ", "{{USER_MEMORY}}", "1Gi", "m")], {"USER_MEMORY": "1024Mi"}, None,
     "ok"),
    ("OSMO's 5120Mi GT 5Gi fails", [("GT", "{{USER_STORAGE}}", "5Gi", "{{USER_STORAGE}} <= 5Gi")],
     {"USER_STORAGE": "5120Mi"}, None, "UserError: " + ASSERT + "5120Mi <= 5Gi"),
    ("KiB is Ki", [("EQ", "{{USER_MEMORY}}", "2Ki", "m")], {"USER_MEMORY": "2KiB"}, None, "ok"),
    ("bytes", [("LT", "{{USER_MEMORY}}", "1Ki", "m")], {"USER_MEMORY": "1023B"}, None, "ok"),
    # ---------------------------------------------------------------------------- millicores
    ("500m is half a core", [("LT", "500m", "1", "m")], {}, None, "ok"),
    ("millicores against a float", [("GE", "{{USER_CPU}}", "500m", "CPU {{USER_CPU}} < 500m")],
     {"USER_CPU": 0.25}, None, "UserError: " + ASSERT + "CPU 0.25 < 500m"),
    ("1500m equals 1.5", [("EQ", "{{USER_CPU}}", "1500m", "m")], {"USER_CPU": 1.5}, None, "ok"),
    # -------------------------------------------------------------------------- exponent form
    ("exponent equals k", [("EQ", "1e3", "1k", "m")], {}, None, "ok"),
    ("E alone is exa", [("GT", "1E", "1P", "m")], {}, None, "ok"),
    ("negative exponent", [("EQ", "2.5e-1", "250m", "m")], {}, None, "ok"),
    ("huge float renders with an exponent", [("GT", "{{USER_MEMORY}}", "1E", "m")],
     {"USER_MEMORY": 1e300}, None, "ok"),
    # ------------------------------------------------------------------------------------ NE
    ("NE fails on equal numbers", [("NE", "{{USER_GPU}}", "0", "Training needs a GPU")],
     {"USER_GPU": 0}, None, "UserError: " + ASSERT + "Training needs a GPU"),
    ("NE passes", [("NE", "{{USER_GPU}}", "0", "m")], {"USER_GPU": 2}, None, "ok"),
    ("NE numeric, not textual", [("NE", "{{USER_GPU}}", "1", "same")], {"USER_GPU": "1.0"}, None,
     "UserError: " + ASSERT + "same"),
    ("NE on strings", [("NE", "{{ZONE}}", "us-east", "m")], {"ZONE": "eu-west"}, None, "ok"),
    # ------------------------------------------------------------------------- EQ on strings
    ("EQ on strings passes", [("EQ", "{{GPU_TYPE}}", "H100", "m")], {"GPU_TYPE": "H100"}, None,
     "ok"),
    ("EQ on strings fails", [("EQ", "{{GPU_TYPE}}", "H100", "{{GPU_TYPE}} is not H100")],
     {"GPU_TYPE": "A100"}, None, "UserError: " + ASSERT + "A100 is not H100"),
    ("EQ on MIG profile text", [("EQ", "{{MIG}}", "1g.10gb", "m")], {"MIG": " 1g.10gb "}, None,
     "ok"),
    ("EQ string against number", [("EQ", "{{GPU_TYPE}}", "4", "{{GPU_TYPE}} != 4")],
     {"GPU_TYPE": "four"}, None, "UserError: " + ASSERT + "four != 4"),
    # ---------------------------------------------------------------------------- arithmetic
    ("memory margin passes on one node",
     [("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}} * 0.8", "{{USER_MEMORY}} > 80% of {{K8_MEMORY}}")],
     {"USER_MEMORY": "200Gi"}, None, "ok"),
    ("memory margin fails on every node",
     [("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}} * 0.8", "{{USER_MEMORY}} > 80% of {{K8_MEMORY}}")],
     {"USER_MEMORY": "250Gi"}, None,
     "UserError: " + _table("cpu-node  16     64Gi    500Gi    0    250Gi > 80% of 64Gi",
                            "gpu-node  63.75  255Gi   1Ti      8    250Gi > 80% of 255Gi")),
    ("parentheses", [("LE", "({{USER_CPU}} + 1) * 2", "{{K8_CPU}}", "m")], {"USER_CPU": 30},
     None, "ok"),
    ("division", [("LE", "{{USER_STORAGE}}", "{{K8_STORAGE}} / 2", "too big")],
     {"USER_STORAGE": "512Gi"}, None, "ok"),
    ("arithmetic on both sides", [("EQ", "2 * 512Mi", "1Gi / 2 + 512Mi", "m")], {}, None, "ok"),
    ("unary minus", [("LT", "-{{USER_GPU}}", "0", "m")], {"USER_GPU": 1}, None, "ok"),
    ("division by zero", [("GT", "{{USER_GPU}} / 0", "1", "m")], {"USER_GPU": 1}, None,
     "UserError: " + FAILED + "resource validation limits rule 1 (left operand): division by "
     "zero in '1 / 0'"),
    ("exponent out of range", [("GT", "{{USER_CPU}}", "1e5000", "m")], {"USER_CPU": 1}, None,
     "UserError: " + FAILED + "resource validation limits rule 1 (right operand): invalid "
     "quantity '1e5000': the exponent must be between -1000 and 1000"),
    # ---------------------------------------------------------------- missing and null values
    ("missing value", [("GT", "{{USER_MEMORY}}", "0", "m")], {}, None,
     "MissingVariableError: " + FAILED + "resource validation limits rule 1 (left operand): "
     + MISSING.format(name="USER_MEMORY")),
    ("null default", [("LE", "{{USER_CPU}}", "8", "m")], {"USER_CPU": None}, None,
     "MissingVariableError: " + FAILED + "resource validation limits rule 1 (left operand): "
     + MISSING.format(name="USER_CPU")),
    ("missing value in a node rule", [("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}}", "m")],
     {"USER_MEMORY": None}, None,
     "MissingVariableError: " + FAILED + "resource validation limits rule 1 (left operand): "
     + MISSING.format(name="USER_MEMORY")),
    ("missing value in the right operand", [("LE", "1", "{{LIMIT}}", "m")], {}, None,
     "MissingVariableError: " + FAILED + "resource validation limits rule 1 (right operand): "
     + MISSING.format(name="LIMIT")),
    # -------------------------------------------------------------------- ordering on strings
    ("GT on a string", [("GT", "{{GPU_TYPE}}", "0", "m")], {"GPU_TYPE": "H100"}, None,
     "UserError: " + FAILED + f"resource validation limits rule 1: GT {NUMBER_NEEDED} left "
     "operand '{{GPU_TYPE}}' renders to 'H100'. Give it a numeric value or change the rule."),
    ("LE on a literal string", [("LE", "1", "lots", "m")], {}, None,
     "UserError: " + FAILED + f"resource validation limits rule 1: LE {NUMBER_NEEDED} right "
     "operand is 'lots'. Give it a numeric value or change the rule."),
    ("uppercase K gets a hint", [("LE", "{{USER_MEMORY}}", "8Gi", "m")], {"USER_MEMORY": "4K"},
     None,
     "UserError: " + FAILED + f"resource validation limits rule 1: LE {NUMBER_NEEDED} left "
     "operand '{{USER_MEMORY}}' renders to '4K' (invalid quantity '4K': use k (10^3) or Ki "
     "(2^10)). Give it a numeric value or change the rule."),
    ("a boolean is not a number", [("GE", "{{USER_GPU}}", "0", "m")], {"USER_GPU": True}, None,
     "UserError: " + FAILED + f"resource validation limits rule 1: GE {NUMBER_NEEDED} left "
     "operand '{{USER_GPU}}' renders to 'True'. Give it a numeric value or change the rule."),
    # ------------------------------------------------------------------------------ node rules
    ("GPU fits on one of several nodes", [("LE", "{{USER_GPU}}", "{{K8_GPU}}", "m")],
     {"USER_GPU": 8}, None, "ok"),
    ("all rules must hold on the same node",
     [("LE", "{{USER_GPU}}", "{{K8_GPU}}", "GPU {{USER_GPU}} > {{K8_GPU}}"),
      ("LE", "{{USER_CPU}}", "{{K8_CPU}}", "CPU {{USER_CPU}} > {{K8_CPU}}")],
     {"USER_GPU": 1, "USER_CPU": 64}, None,
     "UserError: " + _table("cpu-node  16     64Gi    500Gi    0    GPU 1 > 0",
                            "gpu-node  63.75  255Gi   1Ti      8    CPU 64 > 63.75")),
    ("no nodes", [("LE", "{{USER_GPU}}", "{{K8_GPU}}", "m")], {"USER_GPU": 1}, [],
     "UserError: There are no resources in platform h100 and pool pool-a!"),
    ("no nodes but no node rules", [("LE", "{{USER_GPU}}", "8", "m")], {"USER_GPU": 1}, [], "ok"),
    ("static rules fail before node rules",
     [("LE", "{{USER_GPU}}", "{{K8_GPU}}", "m"), ("GE", "{{USER_GPU}}", "0", "negative")],
     {"USER_GPU": -1}, [], "UserError: " + ASSERT + "negative"),
    ("a K8 name in a later expression makes a node rule",
     [("LE", "{{USER_CPU}} + {{ K8_GPU }}", "{{K8_CPU}}", "m")], {"USER_CPU": 50}, None, "ok"),
    ("multi-line messages stay on one row",
     [("LE", "{{USER_GPU}}", "{{K8_GPU}}", "too many\nGPUs")], {"USER_GPU": 9}, None,
     "UserError: " + _table("cpu-node  16     64Gi    500Gi    0    too many GPUs",
                            "gpu-node  63.75  255Gi   1Ti      8    too many GPUs")),
    # ------------------------------------------------------------------------ assert_message
    ("message is not rendered when the rule holds",
     [("LE", "{{USER_CPU}}", "8", "{{UNDEFINED}} {{K8_CPU}}")], {"USER_CPU": 1}, None, "ok"),
    ("message that cannot be rendered", [("LE", "{{USER_CPU}}", "8", "CPU {{UNDEFINED}}")],
     {"USER_CPU": 9}, None,
     "UserError: " + ASSERT + "resource validation limits rule 1 failed (9 <= 8 is false), and "
     "its assert_message could not be rendered: resource validation limits rule 1 "
     "(assert_message): " + MISSING.format(name="UNDEFINED")),
    ("first failing rule wins",
     [("GT", "{{USER_CPU}}", "0", "first"), ("LE", "{{USER_CPU}}", "1", "second"),
      ("LE", "{{USER_CPU}}", "2", "third")],
     {"USER_CPU": 4}, None, "UserError: " + ASSERT + "second"),
    ("Jinja statements in operands",
     [("LE", "{% if USER_CPU > 2 %}2{% else %}{{USER_CPU}}{% endif %}", "2", "m")],
     {"USER_CPU": 7}, None, "ok"),
    # ------------------------------------------------------------------------ K8_GPU_PRODUCT
    ("K8_GPU_PRODUCT is refused", [("EQ", "{{K8_GPU_PRODUCT}}", "H100", "m")], {}, None,
     "UserError: " + FAILED + "resource validation limits rule 1: K8_GPU_PRODUCT is not a node "
     "variable; the node variables are K8_CPU, K8_GPU, K8_MEMORY, K8_STORAGE. Change the rule "
     "to use one of them."),
    ("unknown K8 names in a message", [("GT", "1", "0", "{{K8_GPU_CUDA_DRIVER}}{{K8_X}}")], {},
     None,
     "UserError: " + FAILED + "resource validation limits rule 1: K8_GPU_CUDA_DRIVER, K8_X are "
     "not node variables; the node variables are K8_CPU, K8_GPU, K8_MEMORY, K8_STORAGE. Change "
     "the rule to use one of them."),
]  # fmt: skip


@pytest.mark.parametrize(
    "specs, variables, nodes, expected", [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_rules(
    specs: list[Spec],
    variables: dict[str, Any],
    nodes: list[NodeCapacity] | None,
    expected: str,
) -> None:
    assert _outcome(specs, variables, nodes) == expected


def test_missing_value_is_a_missing_variable_error() -> None:
    rules = _rules(("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}}", "m"))
    with pytest.raises(MissingVariableError) as caught:
        check_node_rules("t1", "p", "h100", rules, {}, NODES)
    assert caught.value.variable == "USER_MEMORY"


def test_alike_nodes_are_one_row_and_the_table_is_capped() -> None:
    rules = _rules(("LE", "{{USER_GPU}}", "{{K8_GPU}}", "GPU {{USER_GPU}} > {{K8_GPU}}"))
    alike = [NodeCapacity(f"n{i}", Decimal(8), Decimal(GI), Decimal(GI), 4) for i in range(30)]
    distinct = [NodeCapacity(f"d{i}", Decimal(8), Decimal(GI), Decimal(GI), i) for i in range(5)]
    many = [NodeCapacity(f"m{i}", Decimal(i + 9), Decimal(GI), Decimal(GI), 1) for i in range(25)]
    with pytest.raises(UserError) as caught:
        check_node_rules("t1", "p", "h100", rules, {"USER_GPU": 8}, alike + distinct + many)
    lines = caught.value.message.split("\n")
    # d4 has 4 GPUs too, so it is alike the n nodes
    assert lines[3] == "n0 (+30 alike)  8    1Gi     1Gi      4    GPU 8 > 4"
    assert lines[4] == "d0              8    1Gi     1Gi      0    GPU 8 > 0"
    assert len(lines) == 1 + 2 + 20 + 2  # header, 20 distinct capacities, footer
    assert lines[-2] == "... and 10 more nodes"


def test_split_rules_keeps_order() -> None:
    rules = _rules(
        ("GT", "{{USER_CPU}}", "0", "a"),
        ("LE", "{{USER_CPU}}", "{{K8_CPU}}", "b"),
        ("GT", "{{USER_GPU}}", "0", "{{K8_GPU}}"),  # a message does not make a node rule
        ("LE", "{% set x = K8_MEMORY %}{{x}}", "1", "d"),
    )
    static, node = split_rules(rules)
    assert [r.index for r in static] == [0, 2]
    assert [r.index for r in node] == [1, 3]
    assert is_node_rule(rules[1].rule) and not is_node_rule(rules[0].rule)


def test_format_table() -> None:
    assert format_table(["a", "long"], [["xyz", "1"], ["q", ""]]) == (
        "a    long\n---  ----\nxyz  1\nq"
    )


# ------------------------------------------------------------------------------------ fuzz

_SNIPPETS = [
    "{{USER_CPU}}", "{{USER_MEMORY}}", "{{USER_GPU}}", "{{K8_CPU}}", "{{K8_MEMORY}}",
    "{{K8_GPU}}", "{{K8_STORAGE}}", "{{X}}", "{{ X * 2 }}", "{{ X / 0 }}", "{{X|int}}",
    "{% if X %}1{% endif %}", "{{ 10 ** 10 ** 10 }}", "{{K8_GPU_PRODUCT}}", "{{ 'a' * 9 }}",
    "1", "0", "-1", "500m", "16Gi", "1G", "1e3", "1E", "1e9999", ".5", "4K", "1g.10gb",
    "abc", "", " ", "*", "/", "+", "-", "(", ")", "{{", "}}", "{%", "{#", "%}", "\n", "None",
]  # fmt: skip
_OPERANDS = st.lists(st.sampled_from(_SNIPPETS), max_size=6).map("".join) | st.text(max_size=20)
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(10**300, 10**5000), st.floats(),
    st.text(max_size=10), st.sampled_from(["16Gi", "500m", "1e3", "4K", "-1", "1/0"]),
)  # fmt: skip
_RULES = st.lists(
    st.builds(
        lambda op, left, right, message, index: NamedRule(
            "fuzz",
            index,
            ResourceRule.model_construct(
                operator=op, left_operand=left, right_operand=right, assert_message=message
            ),
        ),
        st.sampled_from(["GT", "GE", "LT", "LE", "EQ", "NE", "XX"]),
        _OPERANDS,
        _OPERANDS,
        _OPERANDS,
        st.integers(0, 5),
    ),
    max_size=4,
)
_NODES = st.lists(
    st.builds(
        NodeCapacity,
        st.text(max_size=5),
        st.decimals(min_value=0, max_value=10**6, places=3),
        st.decimals(min_value=0, max_value=10**15, places=0),
        st.decimals(min_value=0, max_value=10**15, places=0),
        st.integers(0, 16),
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(_RULES, st.dictionaries(st.sampled_from(["USER_CPU", "USER_MEMORY", "USER_GPU", "X"]),
                               _VALUES), _NODES)  # fmt: skip
def test_fuzz_only_corral_errors(
    rules: list[NamedRule], variables: dict[str, Any], nodes: list[NodeCapacity]
) -> None:
    for check in (
        lambda: check_static_rules("t", rules, variables),
        lambda: check_node_rules("t", "p", "q", rules, variables, nodes),
    ):
        try:
            check()
        except CorralError as err:
            assert isinstance(err, UserError)
            assert err.message


# -------------------------------------------------------------------------------- the docs

DOC = REPO / "docs" / "resource_validation.md"


def test_doc_examples_are_valid_resource_validations() -> None:
    blocks = re.findall(r"```json\n(.*?)\n```", DOC.read_text(), re.S)
    assert blocks
    for block in blocks:
        items, _ = parse_items(ConfigType.RESOURCE_VALIDATION, json.loads(block))
        assert items
        for set_name, rules in items.items():
            named = [
                NamedRule(set_name, i, ResourceRule.model_validate(rule))
                for i, rule in enumerate(rules)
            ]
            split_rules(named)
            # With an ordinary request every example holds on the test nodes.
            variables = {"USER_CPU": 4, "USER_GPU": 1, "USER_MEMORY": "16Gi",
                         "USER_STORAGE": "10Gi", "ZONE": "us-east"}  # fmt: skip
            check_static_rules("t1", named, variables)
            check_node_rules("t1", "p", "h100", named, variables, NODES)
