"""The BACKEND ``kubernetes`` section: what is accepted, what is refused, and a backend whose
cluster cannot be reached does not stop the others."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from corral.domain.configs.backend_models import Backend
from tests.conftest import REPO, Api

DOC = REPO / "docs" / "configs" / "backend.md"


def test_the_documented_example_is_a_valid_backend() -> None:
    block = re.search(r"cat > gb200.json <<'EOF'\n(.*?)\nEOF", DOC.read_text(), re.S)
    assert block is not None
    backend = Backend.model_validate(json.loads(block.group(1))["backends"]["gb200"])
    assert backend.kubernetes is not None
    assert backend.kubernetes.kubeconfig == "/etc/corral/gb200.kubeconfig"


def _write(api: Api, section: object) -> tuple[int, object]:
    body = {"configs_dict": {"kubernetes": section}}
    return api.call("POST", "/api/configs/backend/default", json=body)


def test_a_section_without_a_cluster_is_refused_naming_the_field(examples: Api) -> None:
    status, body = _write(examples, {})
    assert status == 400, body
    assert body["message"] == (  # type: ignore[index]
        "kubernetes: set kubeconfig (a kubeconfig file on the server) or in_cluster: true"
    )
    status, body = _write(examples, {"in_cluster": True, "kubeconfig": "/x"})
    assert status == 400, body
    assert "remove kubeconfig and context" in body["message"]  # type: ignore[index]
    status, body = _write(examples, {"kubeconfig": "/x", "api_timeout": "soon"})
    assert status == 400, body
    assert body["message"].startswith("kubernetes.api_timeout: ")  # type: ignore[index]


def test_an_unreachable_cluster_does_not_stop_other_backends(examples: Api, tmp_path: Path) -> None:
    spec = {
        "workflow": {
            "name": "cpu",
            "resources": {"default": {"cpu": 1, "memory": "1Gi"}},
            "tasks": [{"name": "t", "image": "busybox", "command": ["true"]}],
        }
    }
    status, body = examples.call(
        "POST",
        "/api/pool/robotics-training/workflow",
        json={"file": yaml.safe_dump(spec), "source": "wf.yaml"},
    )
    assert status == 200, body
    status, body = _write(examples, {"kubeconfig": str(tmp_path / "missing")})
    assert status == 200, body
    controller = examples.runtime.lifecycle()
    report = controller.tick()  # the default backend is logged as unavailable, nothing raised
    assert report.created_groups == 1  # the workflow on gpu-cluster-01 went on
    assert examples.runtime.backends.kubernetes(examples.runtime.configs.state()) == []
