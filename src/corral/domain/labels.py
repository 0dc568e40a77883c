"""Every label, annotation and reserved name corral writes on the objects it makes, in one place.

OSMO's names (``osmo.*``) are kept so that tools written for OSMO find corral's objects; KAI's
(``kai.scheduler/*``) are what the scheduler reads.
"""

from __future__ import annotations

# ------------------------------------------------------------------ OSMO's labels on every object
WORKFLOW_ID = "osmo.workflow_id"
WORKFLOW_UUID = "osmo.workflow_uuid"
GROUP_NAME = "osmo.group_name"
#: Every object of a task group carries it: cleanup deletes by it.
GROUP_UUID = "osmo.group_uuid"
SUBMITTED_BY = "osmo.submitted_by"

# ---------------------------------------------------------------------- OSMO's labels on pods
TASK_NAME = "osmo.task_name"
TASK_UUID = "osmo.task_uuid"
RETRY_ID = "osmo.retry_id"
PLATFORM = "osmo.platform"
#: The pool and (lowercase) priority of a pod, read back for queue and quota usage.
POOL = "osmo.pool"
PRIORITY = "osmo.priority"

#: Selects every scheduler object corral made for one backend namespace (cleanup of orphans).
NAMESPACE = "osmo.namespace"

# ------------------------------------------------------------------------- corral's own
#: On a task pod given notice of its stop: the notice's JSON (docs/checkpoints.md#the-notice),
#: for a sidecar or the control container to relay. Set before the pod is deleted.
STOP_NOTICE = "corral.dev/stop-notice"
#: On a task pod whose task sets ``stopNotice``: the most notice it wants, in seconds.
STOP_NOTICE_SECONDS = "corral.dev/stop-notice-seconds"
#: On a task pod whose task sets ``noticeSignal``: the signal it wants with the notice ("" for
#: none), instead of its pool's.
STOP_NOTICE_SIGNAL = "corral.dev/stop-notice-signal"
#: In a task pod's containers: the file holding the task's own token
#: (docs/checkpoints.md#a-tasks-own-token), which ``corral task ...`` calls the API with.
TASK_TOKEN_FILE_ENV = "CORRAL_TASK_TOKEN_FILE"

# ----------------------------------------------------------------------------------------- KAI
QUEUE = "kai.scheduler/queue"
#: The queue label of KAI before v0.6.0; OSMO still writes both.
LEGACY_QUEUE = "runai/queue"
SUBGROUP = "kai.scheduler/subgroup-name"
POD_GROUP_ANNOTATION = "pod-group-name"

# ------------------------------------------------------------------------------ reserved names
#: The control container of every task pod, and the task name no user may take.
CONTROL_CONTAINER = "osmo-ctrl"
