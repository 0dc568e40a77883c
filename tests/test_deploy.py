"""deploy/: the kustomize manifests render, are valid Kubernetes objects and grant exactly the
rules of ``rbac.py``; the Dockerfile copies what exists and runs ``corral server``."""

from __future__ import annotations

import fnmatch
import json
import shlex
import shutil
import subprocess
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from corral.backends.kubernetes.rbac import CLUSTER_RULES, NAMESPACED_RULES, group_template_rule
from corral.cli.main import app
from corral.domain.topology.kai_objects import priority_class_manifests
from corral.domain.topology.podgroup import priority_class_name
from tests.conftest import REPO

DEPLOY = REPO / "deploy"
KUSTOMIZATIONS = {
    "base": DEPLOY / "kubernetes",
    "nvlink": DEPLOY / "kubernetes" / "overlays" / "nvlink",
}
SYSTEM_NAMESPACE = "corral-system"
WORKFLOW_NAMESPACE = "corral-workflows"
COMPUTE_DOMAINS_RULE = group_template_rule("resource.nvidia.com", "computedomains").as_dict()

Objects = list[dict[str, Any]]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        print("kubectl is not on PATH: the kustomize manifests cannot be rendered")
        pytest.skip("kubectl is not on PATH (needed for `kubectl kustomize`)")
    return found


_rendered: dict[str, Objects] = {}


def render(name: str) -> Objects:
    """``kubectl kustomize`` of one kustomization (offline), as a list of objects."""
    if name not in _rendered:
        result = subprocess.run(
            [kubectl(), "kustomize", str(KUSTOMIZATIONS[name])],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        _rendered[name] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return _rendered[name]


def one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


def secret_name(objects: Objects, prefix: str = "corral-postgres") -> str:
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert sorted(s["metadata"]["name"].rsplit("-", 1)[0] for s in secrets) == [
        "corral-postgres",
        "corral-session",
    ]
    [name] = [s["metadata"]["name"] for s in secrets if s["metadata"]["name"].startswith(prefix)]
    assert name.startswith(f"{prefix}-")  # the secretGenerator's hash suffix
    return str(name)


@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_kustomization_renders_valid_objects(name: str) -> None:
    objects = render(name)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {
        ("Namespace", SYSTEM_NAMESPACE),
        ("Namespace", WORKFLOW_NAMESPACE),
        ("ServiceAccount", "corral"),
        ("Deployment", "corral"),
        ("Service", "corral"),
        ("StatefulSet", "corral-postgres"),
        ("Service", "corral-postgres"),
        ("Role", "corral"),
        ("RoleBinding", "corral"),
        ("ClusterRole", "corral"),
        ("ClusterRoleBinding", "corral"),
    } <= kinds
    version = kubernetes_validate.latest_version()
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:  # pragma: no cover - shown on failure
            pytest.fail(f"{name}: {where} is invalid: {err}")


@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_objects_are_in_their_namespaces(name: str) -> None:
    objects = render(name)
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}:
            assert namespace is None, obj["kind"]
        elif obj["kind"] in {"Role", "RoleBinding"}:
            assert namespace == WORKFLOW_NAMESPACE, obj["kind"]
        else:
            assert namespace == SYSTEM_NAMESPACE, f"{obj['kind']}/{obj['metadata']['name']}"


def test_base_rbac_equals_rbac_py() -> None:
    objects = render("base")
    assert one(objects, "Role", "corral")["rules"] == [r.as_dict() for r in NAMESPACED_RULES]
    assert one(objects, "ClusterRole", "corral")["rules"] == [r.as_dict() for r in CLUSTER_RULES]


def test_base_priority_classes_equal_the_ones_podgroups_name() -> None:
    objects = [o for o in render("base") if o["kind"] == "PriorityClass"]
    for obj in objects:
        del obj["metadata"]["labels"]  # kustomize's part-of label

    def by_name(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in found}

    assert by_name(objects) == by_name(priority_class_manifests())
    assert sorted(by_name(objects)) == sorted(
        priority_class_name(p) for p in ("HIGH", "NORMAL", "LOW")
    )


def test_nvlink_overlay_adds_exactly_the_compute_domains_rule() -> None:
    objects = render("nvlink")
    assert one(objects, "Role", "corral")["rules"] == [
        *(r.as_dict() for r in NAMESPACED_RULES),
        COMPUTE_DOMAINS_RULE,
    ]
    assert one(objects, "ClusterRole", "corral")["rules"] == [r.as_dict() for r in CLUSTER_RULES]
    base = {(o["kind"], o["metadata"]["name"]) for o in render("base")}
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == base


@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_bindings_name_the_service_account(name: str) -> None:
    objects = render(name)
    subject = {"kind": "ServiceAccount", "name": "corral", "namespace": SYSTEM_NAMESPACE}
    for kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = one(objects, kind, "corral")
        assert binding["subjects"] == [subject], kind
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": "corral",
        }
    assert one(objects, "ServiceAccount", "corral")["metadata"]["namespace"] == SYSTEM_NAMESPACE


@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_deployment_reads_the_database_url_and_probes_health(name: str) -> None:
    objects = render(name)
    secret = secret_name(objects)
    deployment = one(objects, "Deployment", "corral")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    budget = one(objects, "PodDisruptionBudget", "corral")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "corral"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    [container] = pod["containers"]
    env = {item["name"]: item for item in container["env"]}
    assert env["CORRAL_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": secret, "key": "CORRAL_DATABASE_URL"}
    }
    # Every replica signs and checks sessions with the same key.
    assert env["CORRAL_SESSION_KEY"]["valueFrom"] == {
        "secretKeyRef": {
            "name": secret_name(objects, "corral-session"),
            "key": "CORRAL_SESSION_KEY",
        }
    }
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 8000}, probe
    assert {"containerPort": 8000, "name": "http", "protocol": "TCP"} in container["ports"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert len(tmp) == 1
    assert "emptyDir" in volumes[tmp[0]["name"]]

    service = one(objects, "Service", "corral")
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(8000, "http")]
    assert (
        service["spec"]["selector"].items() <= deployment["spec"]["selector"]["matchLabels"].items()
    )


def test_postgres_uses_the_generated_secret() -> None:
    objects = render("base")
    secret = secret_name(objects)
    postgres = one(objects, "StatefulSet", "corral-postgres")
    [container] = postgres["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "postgres:16"
    refs = {
        item["name"]: item["valueFrom"]["secretKeyRef"]
        for item in container["env"]
        if "valueFrom" in item
    }
    for key in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"):
        assert refs[key] == {"name": secret, "key": key}
    [claim] = postgres["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    env_file = dict(
        line.split("=", 1)
        for line in (DEPLOY / "kubernetes" / "base" / "postgres.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    user, password, db = (
        env_file[k] for k in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB")
    )
    assert env_file["CORRAL_DATABASE_URL"] == (
        f"postgresql+psycopg://{user}:{password}@corral-postgres:5432/{db}"
    )


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_copies_files_that_exist_and_runs_corral_server() -> None:
    instructions = dockerfile_instructions()
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for keyword, arguments in instructions:
        if keyword != "COPY":
            continue
        words = shlex.split(arguments)
        if any(word.startswith("--from=") for word in words):
            continue  # from another build stage, not the repository
        sources += [word for word in words[:-1] if not word.startswith("--")]
    assert sources
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
        assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source
    # Everything pyproject.toml force-includes into the wheel is copied.
    assert {"pyproject.toml", "README.md", "src", "schemas/crds", "examples/configs"} <= set(
        sources
    )

    froms = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert froms and all(f.startswith("python:3.11-slim") for f in froms)
    assert ("USER", "10001:10001") in instructions
    assert ("EXPOSE", "8000") in instructions
    assert not any(keyword == "HEALTHCHECK" for keyword, _ in instructions)
    [entrypoint] = [arguments for keyword, arguments in instructions if keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["corral", "server", "--host", "0.0.0.0", "--port", "8000"]


def test_server_help_mentions_the_database_url_variable() -> None:
    result = CliRunner().invoke(app, ["server", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "CORRAL_DATABASE_URL" in result.output
