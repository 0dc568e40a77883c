"""OSMO's strategic merge patch and the structural diff."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.formats.diff import changes
from corral.domain.formats.patch import strategic_merge
from corral.errors import UserError

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
keys = st.sampled_from(["a", "b", "c", "name", "spec"])
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=12,
)
objects = st.dictionaries(keys, trees, max_size=4)


def test_osmo_rules() -> None:
    current = {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": [{"k": 1}, {"k": 2}], "d": 1}
    patch = {
        "a": {"y": {"$action": "delete"}, "z": 3},
        "b": [3],
        "c": [{"$index": 1, "$action": "replace", "k": 9}, {"$index": 0, "j": 0}, {"k": 3}],
        "d": {"$action": "delete"},
    }
    assert strategic_merge(current, patch) == {
        "a": {"x": 1, "z": 3},
        "b": [3],
        "c": [{"k": 1, "j": 0}, {"k": 9}, {"k": 3}],
    }
    assert current["a"] == {"x": 1, "y": 2}  # inputs are not modified
    assert strategic_merge(
        {"c": [{"k": 1}, {"k": 2}]}, {"c": [{"$index": 0, "$action": "delete"}]}
    ) == {"c": [{"k": 2}]}


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"c": [{"$index": 5}]}, "$index 5 is outside the list (it has 1 items)"),
        ({"c": [{"$index": 0, "$action": "move"}]}, "$action 'move' is not one of replace, delete"),
    ],
)
def test_bad_index_patches(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as caught:
        strategic_merge({"c": [{"k": 1}]}, patch)
    assert caught.value.message == message


@given(objects, objects)
def test_patch_without_directives_sets_every_scalar_it_names(current: Any, patch: Any) -> None:
    merged = strategic_merge(current, patch)
    for key, value in patch.items():
        if not isinstance(value, dict | list):
            assert merged[key] == value
    for key in current:
        assert key in merged or (
            isinstance(patch.get(key), dict) and patch[key].get("$action") == "delete"
        )


@given(objects)
def test_empty_patch_is_identity(current: Any) -> None:
    assert strategic_merge(current, {}) == current


@given(objects, objects)
def test_diff_is_empty_exactly_for_equal_values(before: Any, after: Any) -> None:
    assert (changes(before, after) == []) == (before == after)
    assert changes(before, before) == []


@given(objects, objects)
def test_diff_names_every_top_level_key_that_changed(before: Any, after: Any) -> None:
    touched = {change.path[0] for change in changes(before, after)}
    expected = {k for k in {*before, *after} if before.get(k, object()) != after.get(k, object())}
    assert touched == expected
