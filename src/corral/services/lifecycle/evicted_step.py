"""A workflow's step for a group that was evicted (docs/lifecycle.md#preemption,
docs/health.md#running-work): notice first (unless a node failed), then every task ends as its
exit code says, or the group goes back to the queue whole, keeping its place."""

from __future__ import annotations

import dataclasses

from corral.domain.workflows.record import StoredGroup, StoredTask
from corral.domain.workflows.statuses import TaskState, TaskStatus, group_status
from corral.services.lifecycle.effects import NotifyTask, StopTask
from corral.services.lifecycle.evictions import eviction_of
from corral.services.lifecycle.notices import (
    Answers,
    answers,
    eviction_stop,
    keep_checkpoints,
    notice_of,
    stop_due,
    task_notice,
)
from corral.services.lifecycle.step_base import RUNNING_STATES, StepBase

#: Why a group that would be placed again ends instead on a cluster that places pods itself.
NOT_PLACED_AGAIN = (
    "Not placed again: on a Kubernetes backend corral cannot put a gang back in its queue yet "
    "(docs/kubernetes.md#not-yet)."
)


class EvictedGroups(StepBase):
    """Stopping an evicted group: a part of ``step.WorkflowStep``."""

    def _evicted(self, group: StoredGroup) -> None:
        """The group was evicted (its pods are unbound already) by the scheduler, a drain, or
        a node that failed under it: stop its tasks; each ends as its exit code says (3006
        preempted, 3001 backend error for a node fault: the task's exit actions, then the
        pool's). When every task would be RESCHEDULED, the group goes back to the queue
        instead (its tasks' next attempts); otherwise every task ends. Unless a node failed,
        the tasks first get notice (``notices.py``), and stop at once when it ends."""
        if self.group_status[group.name] not in RUNNING_STATES:
            self.changes.group(group.uuid, evict=False)
            return  # it ended in this tick already
        eviction = eviction_of(
            group, self.pool_actions, max_retry=self.max_retry, pool_grace_s=self.grace_seconds
        )
        if eviction.grace_s is not None:  # not a node fault
            said = self._after_notice(group)
            if said is None:
                return  # noticed: it stops at the first of every task ready or the deadline
            eviction = dataclasses.replace(eviction, grace_s=0.0)
            self.changes.eviction_stops.append(eviction_stop(self.workflow, group, said, self.now))
        self.changes.group(group.uuid, evict=False)
        outcomes = {task.uuid: eviction.outcome(task) for task in group.tasks}
        requeue = not self.backend.schedules_itself and all(
            outcome.status is TaskStatus.RESCHEDULED for outcome in outcomes.values()
        )
        for task in group.tasks:
            outcome = outcomes[task.uuid]
            added = outcome.message
            if outcome.status is TaskStatus.RESCHEDULED and not requeue:
                added = NOT_PLACED_AGAIN if self.backend.schedules_itself else ""
            note = " ".join(part for part in (eviction.message, added) if part)
            if requeue:
                self._requeue_task(task, note, eviction.code, eviction.grace_s)
            else:  # a gang is requeued whole or not at all
                status = outcome.status
                if status is TaskStatus.RESCHEDULED:
                    status = eviction.failed
                self._end_task(
                    task, status, message=note, code=eviction.code, grace_s=eviction.grace_s
                )
        if requeue:
            self.group_status[group.name] = TaskStatus.SCHEDULING
            self.changes.group(
                group.uuid,
                status=TaskStatus.SCHEDULING.value,
                scheduling_at=self.now,
                started_at=None,
                domains=None,
                pending_reason=None,
            )
        else:
            states = [TaskState(self.task_status[t.uuid], t.lead) for t in group.tasks]
            self._set_group(
                group, group_status(states, ignore_non_lead_status=group.ignore_non_lead)
            )

    def _after_notice(self, group: StoredGroup) -> Answers | None:
        """The running tasks' answers once the group is to stop now; None while its notice
        runs (given now, the first time)."""
        runs = [
            (task, self._run(task))
            for task in group.tasks
            if self.task_status[task.uuid] in RUNNING_STATES
        ]
        if group.notice_deadline is None:
            notice = notice_of(
                self.workflow, group, self.notice_seconds, self.notice_signal, self.now
            )
            if runs and notice.deadline > self.now:
                self.changes.group(group.uuid, notice_at=self.now, notice_deadline=notice.deadline)
                self.effects.extend(
                    NotifyTask(run, task_notice(notice, run.pod)) for _, run in runs
                )
                return None
        said = answers(runs, self.executor, self.now)
        keep_checkpoints(self.changes, said.checkpoints)
        return said if stop_due(group, said, self.now) else None

    def _requeue_task(
        self, task: StoredTask, message: str, code: int, grace_s: float | None
    ) -> None:
        """Stop the attempt; the next one waits for the scheduler with the group. The attempt
        that ended is kept (``task_attempts``): the task itself starts afresh, without an exit
        code of its own."""
        if self.task_status[task.uuid] in RUNNING_STATES:
            run = self._run(task)
            self._keep_log(task, run)
            self.effects.append(StopTask(run, grace_s))
        self._end_attempt(task, code, message)
        self.task_status[task.uuid] = TaskStatus.SCHEDULING
        self.changes.task(
            task.uuid,
            status=TaskStatus.SCHEDULING.value,
            retry_id=task.retry_id + 1,
            exit_code=None,
            message=f"Attempt {task.retry_id} stopped: {message}",
            started_at=None,
            node=None,
        )
