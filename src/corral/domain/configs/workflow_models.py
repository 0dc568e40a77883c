"""The WORKFLOW config model: limits and timeouts for every workflow."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from corral.domain.configs.models import FieldProblem, StrictModel, check_duration
from corral.domain.formats.durations import parse_duration


class WorkflowInfo(StrictModel):
    tags: list[str] = []
    max_name_length: int = Field(default=64, ge=1)


class UserWorkflowLimits(StrictModel):
    max_num_workflows: int | None = Field(default=None, gt=0)
    max_num_tasks: int | None = Field(default=None, gt=0)
    jinja_sandbox_workers: int = Field(default=2, ge=1)
    jinja_sandbox_max_time: float = Field(default=0.5, gt=0)
    jinja_sandbox_memory_limit: int = Field(default=104857600, gt=0)

    @field_validator("jinja_sandbox_max_time", mode="before")
    @classmethod
    def _int_is_float(cls, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class WorkflowConfig(StrictModel):
    """Limits and timeouts for workflows. Sections corral does not use yet are kept as given."""

    max_num_tasks: int = Field(default=100, ge=1)
    max_num_ports_per_task: int = Field(default=30, ge=0)
    max_retry_per_task: int = Field(default=0, ge=0)
    max_retry_per_job: int = Field(default=5, ge=0)
    default_schedule_timeout: int = Field(default=30, ge=1)
    default_exec_timeout: str = "7d"
    default_queue_timeout: str = "60d"
    max_exec_timeout: str = "30d"
    max_queue_timeout: str = "60d"
    force_cleanup_delay: str = "1h"
    max_log_lines: int = Field(default=10000, ge=0)
    max_task_log_lines: int = Field(default=1000, ge=0)
    max_error_log_lines: int = Field(default=100, ge=0)
    max_event_log_lines: int = Field(default=100, ge=0)
    task_heartbeat_frequency: str = "10m"
    workflow_info: WorkflowInfo = WorkflowInfo()
    user_workflow_limits: UserWorkflowLimits = UserWorkflowLimits()
    workflow_data: dict[str, Any] = {}
    backend_images: dict[str, Any] = {}
    credential_config: dict[str, Any] = {}
    plugins_config: dict[str, Any] = {}
    labels_config: dict[str, Any] = {}
    workflow_alerts: dict[str, Any] = {}
    workflow_log: dict[str, Any] = {}
    workflow_app: dict[str, Any] = {}

    @field_validator(
        "default_exec_timeout",
        "default_queue_timeout",
        "max_exec_timeout",
        "max_queue_timeout",
        "force_cleanup_delay",
        "task_heartbeat_frequency",
    )
    @classmethod
    def _durations(cls, value: str) -> str:
        if not value:
            raise ValueError("a duration is required here (e.g. 7d, 12h, PT30M)")
        return check_duration(value)

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> WorkflowConfig:
        for kind in ("exec", "queue"):
            default = getattr(self, f"default_{kind}_timeout")
            maximum = getattr(self, f"max_{kind}_timeout")
            if parse_duration(default) > parse_duration(maximum):
                raise FieldProblem(
                    f"default_{kind}_timeout",
                    f"default_{kind}_timeout {default} is longer than max_{kind}_timeout {maximum}",
                )
        return self
