"""One wording for an unknown field, whichever reader meets it (issue 14)."""

from __future__ import annotations

import pytest

from corral.domain.cluster.description import parse_cluster
from corral.domain.configs.types import ConfigType, parse_item
from corral.domain.formats.unknown_fields import MAX_LISTED, unknown_field
from corral.domain.workflows.spec_parser import parse_workflow_spec
from corral.errors import UserError


def test_the_wording_names_the_key_the_closest_name_and_the_fields() -> None:
    assert unknown_field("colour", ["name", "color"]) == (
        "unknown field 'colour' (did you mean 'color'?); the fields here are name, color."
    )
    assert unknown_field("cpu", ["gpu"]) == "unknown field 'cpu'; the fields here are gpu."
    assert unknown_field("action", ["actions"], suggestion="actions") == (
        "unknown field 'action' (did you mean 'actions'?); the fields here are actions."
    )
    many = [f"field_{index}" for index in range(MAX_LISTED + 1)]
    assert unknown_field("other", many) == "unknown field 'other'."
    assert unknown_field("field_x", many) == "unknown field 'field_x' (did you mean 'field_9'?)."


def test_the_three_readers_word_a_typo_alike() -> None:
    with pytest.raises(UserError) as workflow:
        parse_workflow_spec(
            "workflow:\n  name: w\n  tasks:\n  - name: t\n    image: x\n    imag: y\n"
        )
    with pytest.raises(UserError) as cluster:
        parse_cluster("nodes:\n- name: n\n  lables: {}\n")
    with pytest.raises(UserError) as pool:
        parse_item(ConfigType.POOL, "p", {"backend": "b", "platforms": {"x": {"descripton": ""}}})
    assert workflow.value.message.endswith(
        "workflow.tasks[0].imag: unknown field 'imag' (did you mean 'image'?); the fields here "
        "are name, image, command, args, lead, environment, credentials, inputs, outputs, files, "
        "volumeMounts, privileged, hostNetwork, resource, exitActions, checkpoint, downloadType, "
        "cacheSize, kpis, stopNotice, noticeSignal."
    )
    assert cluster.value.message == (
        "cluster.yaml:3:3: nodes[0].lables: unknown field 'lables' (did you mean 'labels'?); "
        "the fields here are name, labels, taints, allocatable, unschedulable, conditions, "
        "fabric."
    )
    assert pool.value.path == ("platforms", "x", "descripton")
    assert pool.value.message == (
        "unknown field 'descripton' (did you mean 'description'?); the fields here are "
        "description, host_network_allowed, privileged_allowed, allowed_mounts, "
        "default_variables, resource_validations, override_pod_template."
    )


def test_a_config_names_the_fields_of_the_union_member_it_tried() -> None:
    role = {"policies": [{"actions": [{"base": "http", "path": "/x", "method": "get", "x": 1}]}]}
    with pytest.raises(UserError) as refused:
        parse_item(ConfigType.ROLE, "r", role)
    assert refused.value.path == ("policies", 0, "actions", 0, "x")
    assert refused.value.message == ("unknown field 'x'; the fields here are base, path, method.")
