"""The pod-template merge: OSMO's rule (§4.1) with its defects fixed, and provenance."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.formats.json_paths import leaves
from corral.domain.platform.template_merge import merge, merge_templates

# ---------------------------------------------------------------- worked examples of §4.1


def test_mappings_merge_recursively_and_scalars_replace() -> None:
    base = {"spec": {"nodeSelector": {"a": "1"}, "priority": 1, "dnsPolicy": "ClusterFirst"}}
    override = {"spec": {"nodeSelector": {"b": "2"}, "priority": 5}}
    assert merge(base, override) == {
        "spec": {"nodeSelector": {"a": "1", "b": "2"}, "priority": 5, "dnsPolicy": "ClusterFirst"}
    }


def test_null_overrides_instead_of_deleting() -> None:
    assert merge({"spec": {"hostname": "x"}}, {"spec": {"hostname": None}}) == {
        "spec": {"hostname": None}
    }


def test_list_items_with_equal_name_merge_and_others_append_in_order() -> None:
    base = {"containers": [{"name": "user", "image": "x"}, {"name": "osmo-ctrl"}]}
    override = {"containers": [{"name": "sidecar"}, {"name": "user", "image": "y", "tty": True}]}
    assert merge(base, override) == {
        "containers": [
            {"name": "user", "image": "y", "tty": True},
            {"name": "osmo-ctrl"},
            {"name": "sidecar"},
        ]
    }


def test_the_verified_osmo_example() -> None:
    base = {
        "spec": {
            "containers": [
                {"name": "user", "image": "x", "resources": {"limits": {"cpu": "1"}}},
                {"name": "osmo-ctrl"},
            ],
            "tolerations": [{"key": "a", "effect": "NoSchedule"}],
            "nodeSelector": {"a": "1"},
        }
    }
    override = {
        "spec": {
            "containers": [
                {"name": "user", "resources": {"limits": {"memory": "2Gi"}}},
                {"name": "sidecar"},
            ],
            "tolerations": [{"key": "a", "effect": "NoSchedule"}],
            "nodeSelector": {"b": "2"},
        }
    }
    assert merge(base, override) == {
        "spec": {
            "containers": [
                {
                    "name": "user",
                    "image": "x",
                    "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                },
                {"name": "osmo-ctrl"},
                {"name": "sidecar"},
            ],
            # OSMO keeps this toleration twice; corral once.
            "tolerations": [{"key": "a", "effect": "NoSchedule"}],
            "nodeSelector": {"a": "1", "b": "2"},
        }
    }


def test_scalar_lists_concatenate_as_in_osmo() -> None:
    base = {"args": ["--a", "1"], "command": ["python"]}
    override = {"args": ["--a", "2"], "command": ["-m", "train"]}
    assert merge(base, override) == {
        "args": ["--a", "1", "--a", "2"],
        "command": ["python", "-m", "train"],
    }


def test_string_lists_containing_name_and_integer_lists_merge() -> None:
    # OSMO crashes on both (TypeError).
    base = {"args": ["--name", "x"], "securityContext": {"supplementalGroups": [1000]}}
    override = {"args": ["--name=y"], "securityContext": {"supplementalGroups": [2000]}}
    assert merge(base, override) == {
        "args": ["--name", "x", "--name=y"],
        "securityContext": {"supplementalGroups": [1000, 2000]},
    }


def test_a_list_replaces_a_missing_or_scalar_value() -> None:
    assert merge({"a": "x"}, {"a": [1]}) == {"a": [1]}
    assert merge({}, {"a": [1]}) == {"a": [1]}


def test_a_mapping_over_a_scalar_replaces_it_instead_of_crashing() -> None:
    assert merge({"a": "x"}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert merge({"a": {"b": 1}}, {"a": "x"}) == {"a": "x"}


def test_unnamed_mappings_that_differ_are_all_kept() -> None:
    base = {"tolerations": [{"key": "a", "operator": "Exists"}]}
    override = {
        "tolerations": [{"key": "b", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]
    }
    assert merge(base, override) == {
        "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    }


def test_named_items_merge_recursively_including_their_lists() -> None:
    base = {"containers": [{"name": "u", "env": [{"name": "A", "value": "1"}]}]}
    override = {
        "containers": [
            {"name": "u", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}
        ]
    }
    assert merge(base, override) == {
        "containers": [
            {"name": "u", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}
        ]
    }


def test_templates_merge_with_unrendered_names() -> None:
    user = {"spec": {"containers": [{"name": "{{USER_CONTAINER_NAME}}", "image": "x"}]}}
    extra = {"spec": {"containers": [{"name": "{{USER_CONTAINER_NAME}}", "tty": True}]}}
    assert merge(user, extra) == {
        "spec": {"containers": [{"name": "{{USER_CONTAINER_NAME}}", "image": "x", "tty": True}]}
    }


def test_merge_does_not_modify_or_alias_its_inputs() -> None:
    base = {"spec": {"tolerations": [{"key": "a"}]}}
    override = {"spec": {"tolerations": [{"key": "b"}], "volumes": [{"name": "v"}]}}
    before = copy.deepcopy((base, override))
    merged = merge(base, override)
    merged["spec"]["volumes"][0]["name"] = "changed"
    merged["spec"]["tolerations"].append({"key": "c"})
    assert (base, override) == before


# ---------------------------------------------------------------------------- provenance


def test_provenance_names_the_template_in_effect_and_those_it_overrode() -> None:
    merged = merge_templates(
        [
            (
                "default_user",
                {"spec": {"containers": [{"name": "u", "resources": {"limits": {"cpu": "1"}}}]}},
            ),
            ("a100", {"spec": {"nodeSelector": {"gpu": "A100"}, "tolerations": [{"key": "gpu"}]}}),
            (
                "big",
                {"spec": {"containers": [{"name": "u", "resources": {"limits": {"cpu": "8"}}}]}},
            ),
            ("a100-again", {"spec": {"tolerations": [{"key": "gpu"}]}}),
        ]
    )
    assert merged.provenance() == [
        {
            "field": "spec.containers[0].name",
            "path": ["spec", "containers", 0, "name"],
            "set_by": "default_user",
            "overrode": [],
            "repeated_by": ["big"],
        },
        {
            "field": "spec.containers[0].resources.limits.cpu",
            "path": ["spec", "containers", 0, "resources", "limits", "cpu"],
            "set_by": "big",
            "overrode": ["default_user"],
            "repeated_by": [],
        },
        {
            "field": "spec.nodeSelector.gpu",
            "path": ["spec", "nodeSelector", "gpu"],
            "set_by": "a100",
            "overrode": [],
            "repeated_by": [],
        },
        {
            "field": "spec.tolerations[0].key",
            "path": ["spec", "tolerations", 0, "key"],
            "set_by": "a100",
            "overrode": [],
            "repeated_by": ["a100-again"],
        },
    ]


def test_provenance_forgets_fields_that_a_later_template_replaced() -> None:
    merged = merge_templates([("a", {"spec": {"x": {"y": 1}}}), ("b", {"spec": {"x": "flat"}})])
    assert [entry["field"] for entry in merged.provenance()] == ["spec.x"]
    assert merged.provenance()[0]["set_by"] == "b"


def test_provenance_quotes_keys_that_are_not_identifiers() -> None:
    merged = merge_templates(
        [("l40s", {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "L40S"}}})]
    )
    assert merged.provenance()[0]["field"] == 'spec.nodeSelector["nvidia.com/gpu.product"]'


# -------------------------------------------------------------------------------- properties

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b", "name", "--name", "x"])
)
_keys = st.sampled_from(["name", "spec", "containers", "env", "value", "args", "key", "image"])


def _trees() -> st.SearchStrategy[Any]:
    return st.recursive(
        _scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(_keys, children, max_size=4),
            # named items, so that merge-by-name is exercised
            st.builds(
                lambda n, d: {"name": n, **d},
                st.sampled_from(["u", "v"]),
                st.dictionaries(_keys, children, max_size=3),
            ),
        ),
        max_leaves=20,
    )


_templates = st.dictionaries(_keys, _trees(), max_size=4)


@settings(max_examples=300, deadline=None)
@given(_templates, _templates)
def test_merge_is_deterministic(base: dict[str, Any], override: dict[str, Any]) -> None:
    first = merge(base, override)
    second = merge(copy.deepcopy(base), copy.deepcopy(override))
    assert json.dumps(first, sort_keys=False) == json.dumps(second, sort_keys=False)


@settings(max_examples=300, deadline=None)
@given(_templates)
def test_merging_with_an_empty_template_changes_nothing(template: dict[str, Any]) -> None:
    assert merge(template, {}) == template
    assert merge({}, template) == template


@settings(max_examples=300, deadline=None)
@given(_templates, _templates)
def test_every_field_of_the_override_is_in_the_result(
    base: dict[str, Any], override: dict[str, Any]
) -> None:
    merged = merge(base, override)
    for key, value in override.items():
        if not isinstance(value, dict | list):
            assert merged[key] == value


@settings(max_examples=200, deadline=None)
@given(st.lists(_templates, min_size=1, max_size=4))
def test_provenance_covers_exactly_the_fields_of_the_merged_template(
    templates: list[dict[str, Any]],
) -> None:
    named = [(f"t{index}", template) for index, template in enumerate(templates)]
    merged = merge_templates(named)
    expected: dict[str, Any] = {}
    for _, template in named:
        expected = merge(expected, template)
    assert merged.value == expected
    assert [tuple(entry["path"]) for entry in merged.provenance()] == [
        path for path, _ in leaves(merged.value) if path
    ]
