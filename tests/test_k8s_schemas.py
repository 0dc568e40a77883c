"""The manifest checker used by rendering tests accepts what Kubernetes accepts and names the
field of what it rejects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.k8s_schemas import _validator, assert_valid_manifest, format_path, manifest_problems


def compute_domain() -> dict[str, Any]:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "compute-domain-abc"},
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": "compute-domain-abc-rct"}},
        },
    }


def pod_group() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "train-abc", "namespace": "team-a"},
        "spec": {
            "minMember": 4,
            "queue": "team-a",
            "topologyConstraint": {
                "topology": "gb200",
                "requiredTopologyLevel": "nvidia.com/gpu.clique",
            },
            "subGroups": [
                {"name": "workers", "minMember": 4},
                {
                    "name": "rack-0",
                    "parent": "workers",
                    "minMember": 2,
                    "topologyConstraint": {"preferredTopologyLevel": "rack"},
                },
            ],
        },
    }


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-abc-0", "labels": {"app": "train"}},
        "spec": {
            "terminationGracePeriodSeconds": 30,
            "resourceClaims": [
                {"name": "imex", "resourceClaimTemplateName": "compute-domain-abc-rct"}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "ports": [{"containerPort": 8080}],
                    "resources": {
                        "limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 4},
                        "claims": [{"name": "imex"}],
                    },
                }
            ],
        },
    }


@pytest.mark.parametrize("make", [compute_domain, pod_group, pod])
def test_valid_manifests_have_no_problems(make: Any) -> None:
    assert manifest_problems(make()) == []
    assert_valid_manifest(make())


def test_a_string_where_the_crd_wants_an_integer_is_named() -> None:
    manifest = compute_domain()
    manifest["spec"]["numNodes"] = "x"
    assert manifest_problems(manifest) == ["spec.numNodes: 'x' is not of type 'integer'"]


def test_crd_problems_are_all_reported_including_unknown_fields() -> None:
    manifest = pod_group()
    manifest["spec"]["minMember"] = "4"
    manifest["spec"]["subGroups"][1]["minMembers"] = 2
    assert manifest_problems(manifest) == [
        "spec.minMember: '4' is not of type 'integer'",
        "spec.subGroups[1]: Additional properties are not allowed ('minMembers' was unexpected)",
    ]


def test_crd_extensions_are_translated_so_valid_values_pass() -> None:
    validator = _validator(
        {
            "type": "object",
            "properties": {
                "a": {"x-kubernetes-int-or-string": True},
                "b": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True,
                },
                "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "d": {"type": "string", "nullable": True},
            },
        }
    )
    for value in (1, "1", "500m"):
        assert list(validator.iter_errors({"a": value, "b": value})) == []
    assert list(validator.iter_errors({"c": {"anything": [1]}, "d": None})) == []
    assert len(list(validator.iter_errors({"a": 1.5, "b": [], "e": 1}))) == 3


def test_crd_version_must_be_served() -> None:
    manifest = compute_domain()
    manifest["apiVersion"] = "resource.nvidia.com/v1"
    assert manifest_problems(manifest) == [
        "apiVersion: resource.nvidia.com/v1 is not a served version of ComputeDomain "
        "(resource.nvidia.com/v1beta1)"
    ]


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        (None, "metadata: None is not of type 'object'"),
        ("x", "metadata: 'x' is not of type 'object'"),
        ({"labels": {}}, "metadata.name: must be a string"),
        ({"name": "Compute_Domain"}, "metadata.name: 'Compute_Domain' is not a DNS-1123"),
        ({"name": "a" * 254}, "metadata.name: 'aaa"),
    ],
)
def test_crd_metadata_needs_a_dns_subdomain_name(metadata: Any, problem: str) -> None:
    manifest = compute_domain()
    manifest["metadata"] = metadata
    problems = manifest_problems(manifest)
    assert len(problems) == 1
    assert problems[0].startswith(problem)


def test_missing_metadata_is_reported() -> None:
    manifest = compute_domain()
    del manifest["metadata"]
    assert manifest_problems(manifest) == ["metadata: must be a mapping"]


def test_pod_with_a_list_for_a_quantity_fails() -> None:
    manifest = pod()
    manifest["spec"]["containers"][0]["resources"]["limits"]["cpu"] = [1]
    assert manifest_problems(manifest) == [
        "spec.containers[0].resources.limits.cpu: [1] is not valid under any of the given schemas"
    ]


def test_pod_unknown_fields_fail_in_strict_mode() -> None:
    manifest = pod()
    manifest["spec"]["containers"][0]["imageName"] = "x"
    [problem] = manifest_problems(manifest)
    assert problem.startswith("spec.containers[0]: ")
    assert "'imageName'" in problem


def test_pod_name_is_checked_too() -> None:
    manifest = pod()
    manifest["metadata"]["name"] = "Train"
    [problem] = manifest_problems(manifest)
    assert problem.startswith("metadata.name: 'Train' is not a DNS-1123 subdomain")


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("example.com/v1", "Widget"), ("v1", "Widget"), ("apps/v1", "Pod")],
)
def test_unknown_kinds_are_reported(api_version: str, kind: str) -> None:
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}}
    assert manifest_problems(manifest) == [f"no schema for {api_version} {kind}"]


def test_missing_api_version_is_reported() -> None:
    assert manifest_problems({"kind": "Pod"}) == ["apiVersion and kind must both be strings"]


def test_assert_valid_manifest_lists_every_problem() -> None:
    manifest = compute_domain()
    manifest["spec"]["numNodes"] = "x"
    manifest["metadata"]["name"] = "Bad"
    with pytest.raises(AssertionError) as caught:
        assert_valid_manifest(manifest)
    message = str(caught.value)
    assert message.startswith("ComputeDomain manifest is not valid:\n")
    assert "  - spec.numNodes: 'x' is not of type 'integer'" in message
    assert "  - metadata.name: 'Bad' is not a DNS-1123 subdomain" in message


def test_format_path() -> None:
    assert format_path(["spec", "containers", 0, "image"]) == "spec.containers[0].image"
    assert format_path([]) == ""
