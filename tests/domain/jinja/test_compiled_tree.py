"""A compiled template tree renders exactly as ``render_tree`` does: the same tree, the same
first error; and a memo shared by many renders never changes what one of them gives.

One difference, a fix: after an ``ARRAY`` was spliced into a list, ``render_tree`` named the
later items of the list by their index in the output; a compiled tree names the template's
own field (which is what ``describe`` looks up, the templates that wrote it)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.formats.json_paths import Path
from corral.domain.jinja.compiled_tree import RenderMemo, compile_tree
from corral.domain.jinja.rendering import render_tree
from corral.domain.schemas.field_types import FieldType
from corral.errors import UserError

TEXTS = st.sampled_from(
    [
        "plain",
        "{{ NAME }}",
        "{{ COUNT }}",
        "{{ COUNT * 2 }}",
        "ARRAY:[a, b]",
        "{{ LIST }}",
        "{{ NAME }}-{{ COUNT }}",
        "{{ MISSING }}",
        "{{ 1 / ZERO }}",
        "{{ lipsum(1) | length > 0 }}",
        "{% for i in range(COUNT) %}{{ i }}{% endfor %}",
    ]
)
LEAVES = st.one_of(TEXTS, st.integers(-5, 5), st.booleans(), st.none())
TREES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, max_size=4),
    ),
    max_leaves=20,
)
VARIABLES = st.fixed_dictionaries(
    {
        "NAME": st.sampled_from(["x", "y"]),
        "COUNT": st.integers(0, 3),
        "ZERO": st.sampled_from([0, 1]),
        "LIST": st.sampled_from(["ARRAY:[p, q ,r]", "ARRAY:[]", "solo"]),
    }
)


def describe(path: Path) -> str:
    return f"field {path!r}"


def type_of(path: Path) -> FieldType | None:
    return None


def anywhere(path: Path) -> str:
    return "field"


def rendered(render: Any) -> tuple[str, Any]:
    try:
        return "ok", render()
    except UserError as err:
        return "error", err.message


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["x", "y", "z"]), TREES, max_size=3), VARIABLES)
def test_a_compiled_tree_renders_as_render_tree(tree: dict[str, Any], variables: Any) -> None:
    expected = rendered(lambda: render_tree(tree, variables, describe=anywhere, type_of=type_of))
    compiled = compile_tree(tree)
    found = rendered(lambda: compiled.render(variables, describe=anywhere, type_of=type_of))
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["x", "y", "z"]), TREES, max_size=3),
    st.lists(VARIABLES, min_size=2, max_size=4),
)
def test_a_shared_memo_changes_no_render(tree: dict[str, Any], variable_sets: Any) -> None:
    compiled = compile_tree(tree)
    memo = RenderMemo()
    for variables in variable_sets:
        alone = rendered(lambda v=variables: compiled.render(v, describe=describe, type_of=type_of))
        shared = rendered(
            lambda v=variables: compiled.render(v, describe=describe, type_of=type_of, memo=memo)
        )
        assert shared == alone


def test_renders_do_not_share_what_they_return() -> None:
    compiled = compile_tree({"spec": {"values": ["{{ LIST }}"], "name": "{{ NAME }}"}})
    memo = RenderMemo()
    variables = {"LIST": "ARRAY:[a,b]", "NAME": "n"}
    first = compiled.render(variables, describe=describe, type_of=type_of, memo=memo)
    first["spec"]["values"].append("changed")
    second = compiled.render(variables, describe=describe, type_of=type_of, memo=memo)
    assert second == {"spec": {"values": ["a", "b"], "name": "n"}}


def test_the_first_failing_value_in_document_order_is_reported() -> None:
    compiled = compile_tree({"a": "{{ FIRST }}", "b": ["{{ SECOND }}"]})
    with pytest.raises(UserError) as raised:
        compiled.render({}, describe=describe, type_of=type_of)
    assert "variable FIRST has no value" in raised.value.message
    assert raised.value.message.startswith("field ('a',): ")


def test_an_array_is_spliced_into_its_list_before_later_items() -> None:
    tree = {"args": ["{{ LIST }}", "{{ NAME }}", ["{{ LIST }}"]]}
    variables = {"LIST": "ARRAY:[p,q]", "NAME": "n"}
    compiled = compile_tree(tree)
    assert compiled.render(variables, describe=describe, type_of=type_of) == {
        "args": ["p", "q", "n", ["p", "q"]]
    }


def test_an_error_after_a_splice_names_the_templates_own_field() -> None:
    compiled = compile_tree({"args": ["{{ LIST }}", "{{ MISSING }}"]})
    with pytest.raises(UserError) as raised:
        compiled.render({"LIST": "ARRAY:[p,q]"}, describe=describe, type_of=type_of)
    assert raised.value.message.startswith("field ('args', 1): variable MISSING has no value")


def test_a_memo_tells_apart_fields_and_the_types_of_values() -> None:
    """Two platforms' templates share a submission's memo: the same text at another field
    renders to that field's type; ``1``, ``1.0`` and ``True`` are equal keys of a dict."""

    def integer_at_count(path: Path) -> FieldType | None:
        return "integer" if path[-1:] == ("count",) else None

    memo = RenderMemo()
    first = compile_tree({"count": "{{ N }}"})
    second = compile_tree({"label": "{{ N }}"})
    assert first.render({"N": 8}, describe=describe, type_of=integer_at_count, memo=memo) == {
        "count": 8
    }
    assert second.render({"N": 8}, describe=describe, type_of=integer_at_count, memo=memo) == {
        "label": "8"
    }
    found = [
        first.render({"N": value}, describe=describe, type_of=type_of, memo=memo)["count"]
        for value in (1, 1.0, True)
    ]
    assert found == ["1", "1.0", "True"]
