"""Parsing config files: syntax errors and semantic errors point at file, line and column."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.formats.documents import Position, locate, parse_document
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


int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | int64 | st.text(max_size=8),
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


# ------------------------------------------------------------------ bounded before parsing

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 10 if previous else ['x'] * 10)}]\n"
    for previous, name in zip([None, "a", "b", "c", "d", "e"], "abcdef", strict=True)
)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        # libyaml's composer overflowed the C stack on this: the process died (issue 13)
        (
            "deep.yaml",
            "a: " + "[" * 30_000,
            "deep.yaml:1:67: lists and mappings are nested more than 64 levels deep here; "
            "flatten the document",
        ),
        (
            "block.yaml",
            "".join(f"{' ' * level}k{level}:\n" for level in range(70)) + " " * 70 + "v: 1\n",
            "block.yaml:65:65: lists and mappings are nested more than 64 levels deep here; "
            "flatten the document",
        ),
        (
            "deep.json",
            '{"a": ' + "[" * 30_000,
            "deep.json:1:70: lists and mappings are nested more than 64 levels deep here; "
            "flatten the document",
        ),
        (
            "bomb.yaml",
            BOMB,
            "bomb.yaml:5:36: its aliases (*name) make the document more than 10 times larger "
            "than it is written; repeat the values instead of aliasing them",
        ),
        (
            "big.yaml",
            "a:\n  b: [1, 18446744073709551616]\n",
            "big.yaml:2:10: a.b.1: the integer 18446744073709551616 does not fit in 64 bits; "
            "use a smaller number",
        ),
        # int() of a 5,000-digit literal raised ValueError (a 500), and costs quadratic time
        (
            "long.json",
            '{"a": [' + "9" * 5000 + "]}",
            "long.json:1:8: the integer 99999999999999999999... (5,000 characters) does not fit "
            "in 64 bits; use a smaller number",
        ),
        (
            "long.yaml",
            "a:\n  b: 0x" + "f" * 5000 + "\n",
            "long.yaml:2:6: invalid YAML: the integer 0xffffffffffffffffff... (5,002 characters) "
            "does not fit in 64 bits; use a smaller number",
        ),
        (
            "lone.json",
            '{"a": {"b": "x\\ud800"}}',
            "lone.json:1:8: a.b: text holds a lone surrogate code point (such as \\ud800), which "
            "is not valid Unicode; remove it or escape the character it was meant to be",
        ),
    ],
)
def test_hostile_documents_are_refused_before_they_hurt(name: str, text: str, message: str) -> None:
    with pytest.raises(UserError) as refused:
        parse_document(text, name)
    assert refused.value.message == message


def test_a_document_longer_than_the_limit_is_not_read() -> None:
    with pytest.raises(UserError) as refused:
        parse_document("a: " + "x" * 100, "long.yaml", max_chars=50)
    assert refused.value.message == (
        "long.yaml: the document is 103 characters long; the limit is 50. Split it, or leave "
        "out what is not needed."
    )


@given(depth=st.integers(min_value=1, max_value=200), as_json=st.booleans())
def test_nesting_is_accepted_exactly_up_to_the_limit(depth: int, as_json: bool) -> None:
    text = "[" * depth + "1" + "]" * depth
    name = "n.json" if as_json else "n.yaml"
    if depth <= 64:
        assert json.dumps(parse_document(text, name), separators=(",", ":")) == text
        return
    with pytest.raises(UserError, match="nested more than 64 levels deep"):
        parse_document(text, name)


def test_aliases_that_stay_small_are_fine() -> None:
    text = "base: &base {cpu: 1, memory: 1Gi}\na: *base\nb: *base\n"
    assert parse_document(text, "ok.yaml")["b"] == {"cpu": 1, "memory": "1Gi"}
