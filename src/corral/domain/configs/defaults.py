"""The configuration a new corral starts with: OSMO's DB-mode defaults, as one bundle."""

from __future__ import annotations

from typing import Any

from corral.domain.configs.workflow_models import WorkflowConfig

_USER_RESOURCES = {
    "cpu": "{{USER_CPU}}",
    "memory": "{{USER_MEMORY}}",
    "nvidia.com/gpu": "{{USER_GPU}}",
    "ephemeral-storage": "{{USER_STORAGE}}",
}
_CTRL_RESOURCES = {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "3Gi"}


def _rule(operator: str, left: str, right: str, message: str) -> dict[str, str]:
    return {
        "operator": operator,
        "left_operand": left,
        "right_operand": right,
        "assert_message": message,
    }


def _everywhere(*actions: str) -> dict[str, Any]:
    return {"effect": "Allow", "actions": list(actions), "resources": ["*"]}


def initial_bundle() -> dict[str, Any]:
    """A fresh copy of the built-in initial configuration."""
    return {
        "backends": {
            "default": {"description": "The embedded cluster", "k8s_namespace": "default"},
        },
        "pod_templates": {
            "default_user": {
                "spec": {
                    "containers": [
                        {
                            "name": "{{USER_CONTAINER_NAME}}",
                            "resources": {
                                "requests": dict(_USER_RESOURCES),
                                "limits": dict(_USER_RESOURCES),
                            },
                        }
                    ]
                }
            },
            "default_ctrl": {
                "spec": {
                    "containers": [
                        {
                            "name": "osmo-ctrl",
                            "resources": {
                                "requests": dict(_CTRL_RESOURCES),
                                "limits": dict(_CTRL_RESOURCES),
                            },
                        }
                    ]
                }
            },
        },
        "resource_validations": {
            "default_cpu": [
                _rule("LE", "{{USER_CPU}}", "{{K8_CPU}}", "Value {{USER_CPU}} too high for CPU"),
                _rule(
                    "GT",
                    "{{USER_CPU}}",
                    "0",
                    "Value {{USER_CPU}} needs to be greater than 0 for CPU",
                ),
            ],
            "default_memory": [
                _rule(
                    "LE",
                    "{{USER_MEMORY}}",
                    "{{K8_MEMORY}}",
                    "Value {{USER_MEMORY}} too high for memory",
                ),
                _rule(
                    "GT",
                    "{{USER_MEMORY}}",
                    "0",
                    "Value {{USER_MEMORY}} needs to be greater than 0 for memory",
                ),
            ],
            "default_storage": [
                _rule(
                    "LT",
                    "{{USER_STORAGE}}",
                    "{{K8_STORAGE}}",
                    "Value {{USER_STORAGE}} too high for storage",
                ),
                _rule(
                    "GT",
                    "{{USER_STORAGE}}",
                    "0",
                    "Value {{USER_STORAGE}} needs to be greater than 0 for storage",
                ),
            ],
            "default_gpu": [
                _rule(
                    "LE", "{{USER_GPU}}", "{{K8_GPU}}", "GPU value {{USER_GPU}} too high for GPU"
                ),
                _rule("GE", "{{USER_GPU}}", "0", "GPU value {{USER_GPU}} cannot be negative"),
            ],
        },
        "pools": {
            "default": {
                "description": "Default pool",
                "backend": "default",
                "default_platform": "default",
                "common_default_variables": {
                    "USER_CPU": 1,
                    "USER_GPU": 0,
                    "USER_MEMORY": "1Gi",
                    "USER_STORAGE": "1Gi",
                },
                "common_resource_validations": [
                    "default_cpu",
                    "default_memory",
                    "default_storage",
                    "default_gpu",
                ],
                "common_pod_template": ["default_ctrl", "default_user"],
                "platforms": {"default": {"description": "Default platform"}},
            },
        },
        "roles": {
            "osmo-admin": {
                "description": "Administrator: every action",
                "policies": [_everywhere("*:*")],
            },
            "osmo-user": {
                "description": "A user of the default pool",
                "policies": [
                    _everywhere(
                        "app:*",
                        "auth:Token",
                        "credentials:*",
                        "mcp:Access",
                        "pool:List",
                        "profile:Read",
                        "profile:Update",
                        "resources:Read",
                        "user:List",
                        "workflow:List",
                        "workflow:Read",
                    ),
                    {"effect": "Allow", "actions": ["workflow:*"], "resources": ["pool/default"]},
                ],
            },
            "osmo-default": {
                "description": "What every authenticated caller may do",
                "policies": [
                    _everywhere(
                        "system:Health",
                        "system:Version",
                        "auth:Login",
                        "auth:Refresh",
                        "auth:Token",
                        "profile:*",
                    )
                ],
            },
        },
        "workflow": WorkflowConfig().model_dump(mode="json"),
    }
