"""Parsing config files: syntax errors and semantic errors point at file, line and column."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.documents import Position, locate, parse_document
from corral.errors import UserError


def test_yaml_error_names_line_and_column() -> None:
    text = "pools:\n  a:\n    backend: [x\n"
    with pytest.raises(UserError) as caught:
        parse_document(text, "pools.yaml")
    assert caught.value.message.startswith("pools.yaml:4:1: invalid YAML: ")


def test_duplicate_keys_are_refused_in_json_and_yaml() -> None:
    with pytest.raises(UserError) as caught:
        parse_document('{"a": 1, "a": 2}', "x.json")
    assert (
        caught.value.message
        == 'x.json: key "a" appears twice in the same object; keep one of them.'
    )
    with pytest.raises(UserError) as caught:
        parse_document("a: 1\nb: 2\na: 3\n", "x.yaml")
    assert (
        caught.value.message
        == 'x.yaml:3:1: invalid YAML: key "a" appears twice in the same mapping'
    )


def test_unclosed_object_hint() -> None:
    with pytest.raises(UserError) as caught:
        parse_document('{\n  "a": {\n    "b": 1\n', "t.json")
    assert caught.value.message == (
        "t.json:4:1: invalid JSON: Expecting ',' delimiter (inside the object opened at line 2, "
        "column 8)"
    )


def test_locate_keys_in_json_and_yaml() -> None:
    text = '{\n  "pools": {\n    "a": {"backend": 5}\n  }\n}\n'
    assert locate(text, ["pools", "a", "backend"]) == Position(3, 11)
    yaml_text = "roles:\n- name: r\n  policies:\n  - action: [x]\n"
    assert locate(yaml_text, ["roles", 0, "policies", 0, "action"]) == Position(4, 5)
    assert locate(text, ["pools", "missing"]) is None
    assert locate("{not yaml: [", ["a"]) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(min_size=1, max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_document_parses_back_to_itself(value: object) -> None:
    assert parse_document(json.dumps(value, indent=2), "v.json") == value


@given(st.text(max_size=60))
def test_parsing_never_raises_anything_but_user_error(text: str) -> None:
    for name in ("f.json", "f.yaml"):
        try:
            parse_document(text, name)
        except UserError as err:
            assert err.message.startswith(name)
