"""Fixtures for code that talks to Kubernetes: one fake API server per session, reset per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.kubernetes.fake_apiserver import FakeKubeServer
from tests.backends.kubernetes.kube_world import KubeWorld
from tests.backends.kubernetes.kube_world import kube_world as make_kube_world
from tests.conftest import Api


@pytest.fixture(scope="session")
def fake_kube_server() -> Iterator[FakeKubeServer]:
    """The running server; prefer ``fake_kube``, which also resets it."""
    with FakeKubeServer() as server:
        yield server


@pytest.fixture
def fake_kube(fake_kube_server: FakeKubeServer) -> FakeKubeServer:
    """The session's server, emptied: default namespaces and vendored CRDs only."""
    fake_kube_server.reset()
    return fake_kube_server


@pytest.fixture
def kubeconfig(fake_kube: FakeKubeServer, tmp_path: Path) -> Path:
    """A kubeconfig file pointing at ``fake_kube`` (namespace ``default``)."""
    return fake_kube.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kube_world(examples: Api, fake_kube: FakeKubeServer, kubeconfig: Path) -> Iterator[KubeWorld]:
    """The example configs with the ``default`` backend on ``fake_kube`` (see kube_world.py)."""
    yield from make_kube_world(examples, fake_kube, kubeconfig)
