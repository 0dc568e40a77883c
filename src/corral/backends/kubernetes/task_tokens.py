"""How a pod receives its task's own token (docs/checkpoints.md#a-tasks-own-token): one Secret
per group, made when the group is applied and deleted with its pods, and a read-only volume in
every container of each pod holding only that pod's token.

The tokens are minted as the group is applied and never stored by corral: the stored manifests
name the Secret nowhere, so the pods are given the volume here, at apply time.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from corral.domain.labels import GROUP_UUID, TASK_UUID, WORKFLOW_UUID
from corral.domain.labels import TASK_TOKEN_FILE_ENV as TOKEN_FILE_ENV

SECRET_PREFIX = "corral-task-tokens-"
VOLUME = "corral-task-token"
MOUNT_PATH = "/var/run/corral"
TOKEN_FILE = f"{MOUNT_PATH}/token"
#: Read-only for the owner: the token is the container's, not for anyone else on its node.
_FILE_MODE = 0o400


def secret_name(group_uuid: str) -> str:
    return f"{SECRET_PREFIX}{group_uuid}"


def token_secret(
    group_uuid: str, workflow_uuid: str, namespace: str, tokens: Mapping[str, str]
) -> dict[str, Any]:
    """The group's Secret: each task's token under its task uuid, labelled as the group's other
    objects so that it is found as one of them."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(group_uuid),
            "namespace": namespace,
            "labels": {WORKFLOW_UUID: workflow_uuid, GROUP_UUID: group_uuid},
        },
        "type": "Opaque",
        "data": {uuid: base64.b64encode(token.encode()).decode() for uuid, token in tokens.items()},
    }


def with_token(pod: Mapping[str, Any]) -> dict[str, Any]:
    """``pod`` with its task's token mounted in every container at :data:`TOKEN_FILE`, and
    :data:`TOKEN_FILE_ENV` naming it (unless the container sets it itself)."""
    labels = pod["metadata"]["labels"]
    spec = dict(pod["spec"])
    volume = {
        "name": VOLUME,
        "secret": {
            "secretName": secret_name(labels[GROUP_UUID]),
            "items": [{"key": labels[TASK_UUID], "path": "token"}],
            "defaultMode": _FILE_MODE,
        },
    }
    spec["volumes"] = [*(spec.get("volumes") or []), volume]
    for key in ("initContainers", "containers"):
        if key in spec:
            spec[key] = [_with_mount(container) for container in spec[key]]
    return {**pod, "spec": spec}


def _with_mount(container: Mapping[str, Any]) -> dict[str, Any]:
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    env = list(container.get("env") or [])
    if all(entry.get("name") != TOKEN_FILE_ENV for entry in env):
        env.append({"name": TOKEN_FILE_ENV, "value": TOKEN_FILE})
    return {
        **container,
        "volumeMounts": [*(container.get("volumeMounts") or []), mount],
        "env": env,
    }
