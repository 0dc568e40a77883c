"""The BACKEND config model: a cluster's namespace and scheduler, how the embedded cluster runs
tasks, and which real cluster a Kubernetes backend drives."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from corral.domain.configs.models import StrictModel, drop_read_only
from corral.domain.formats.durations import parse_duration


class SchedulerSettings(StrictModel):
    scheduler_type: Literal["kai", "default"] = "kai"
    scheduler_name: str = "kai-scheduler"
    scheduler_timeout: int = Field(default=30, ge=1)


class NodeConditions(StrictModel):
    rules: dict[str, str] | None = None
    prefix: str = "osmo.nvidia.com/"


class Execution(StrictModel):
    """corral only: how the embedded (simulated) backend runs tasks (docs/lifecycle.md).

    ``simulate`` waits ``simulated_duration`` and exits 0 (a task may set the env variables
    ``CORRAL_SIMULATED_DURATION`` / ``CORRAL_SIMULATED_EXIT_CODE``); ``local_processes`` runs the
    task's command on the server's machine, confined (docs/lifecycle.md#trust): as ``run_as``
    (``nobody`` when the server is root), never as root unless ``allow_root``, and nowhere
    the machine cannot keep it from the server's files unless ``allow_unconfined``."""

    mode: Literal["simulate", "local_processes"] = "simulate"
    simulated_duration: str = "10s"
    run_as: str | None = Field(default=None, min_length=1, max_length=64)
    allow_root: bool = False
    allow_unconfined: bool = False

    @field_validator("simulated_duration")
    @classmethod
    def _duration(cls, text: str) -> str:
        parse_duration(text)
        return text


class KubernetesAccess(StrictModel):
    """corral only: the real cluster a ``kubernetes`` backend drives (docs/kubernetes.md).

    A reference, never credentials: the kubeconfig file lives on the server's disk (or the
    server's service account is used), so no secret is stored in the config database."""

    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool = False
    api_timeout: str = "30s"

    @field_validator("api_timeout")
    @classmethod
    def _duration(cls, text: str) -> str:
        parse_duration(text)
        return text

    @model_validator(mode="after")
    def _one_source(self) -> KubernetesAccess:
        if self.in_cluster and (self.kubeconfig or self.context):
            raise ValueError(
                "in_cluster uses the server's service account; remove kubeconfig and context"
            )
        if not self.in_cluster and not self.kubeconfig:
            raise ValueError("set kubeconfig (a kubeconfig file on the server) or in_cluster: true")
        return self


_BACKEND_READ_ONLY = ("version", "last_heartbeat", "created_date", "online")

#: Scheduler types that understand topology constraints (KAI's Topology CRD).
TOPOLOGY_SCHEDULERS = ("kai",)


class Backend(StrictModel):
    name: str = ""
    description: str = ""
    k8s_namespace: str = "default"
    k8s_uid: str = ""
    dashboard_url: str = ""
    grafana_url: str = ""
    router_address: str = ""
    tests: list[str] = []
    scheduler_settings: SchedulerSettings = SchedulerSettings()
    node_conditions: NodeConditions = NodeConditions()
    execution: Execution = Execution()
    #: Set: the backend is a real cluster; unset: the embedded (simulated) cluster.
    kubernetes: KubernetesAccess | None = None

    @model_validator(mode="before")
    @classmethod
    def _ignore_read_only(cls, data: Any) -> Any:
        return drop_read_only(data, _BACKEND_READ_ONLY)

    @field_validator("tests")
    @classmethod
    def _no_tests(cls, tests: list[str]) -> list[str]:
        if tests:
            raise ValueError("backend tests (BACKEND_TEST) are not supported by corral; use []")
        return tests

    @field_validator("k8s_namespace")
    @classmethod
    def _namespace(cls, namespace: str) -> str:
        if len(namespace) > 63 or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", namespace):
            raise ValueError(f"{namespace!r} is not a valid Kubernetes namespace name")
        return namespace
