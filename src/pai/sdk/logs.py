"""Reading and following the logs of a task attempt."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Literal

from pai.sdk.errors import InvalidArgumentError, NotFoundError
from pai.sdk.job_models import JobDetail, LogLocation, TaskStatus
from pai.sdk.jobs import JobsApi, task_path
from pai.sdk.names import segment

LogStream = Literal["all", "stdout", "stderr", "runtime"]
"""`stdout` and `stderr` of the user's commands, `all` both interleaved, `runtime` what PAI's
runtime wrote around them (plugins, exit classification)."""

NO_TASK_LOG = "NoTaskLogError"


class LogsApi(JobsApi):
    """Log methods. Without `role`, a job with a single role means that role; without
    attempts, the latest job attempt and the task's current attempt."""

    def logs(
        self,
        name: str,
        role: str | None = None,
        index: int = 0,
        job_attempt: int | None = None,
        task_attempt: int | None = None,
        stream: LogStream = "all",
        tail: int | None = None,
    ) -> str:
        """A task attempt's log so far (the last `tail` bytes if given).

        print(client.logs("hello", stream="stdout"))
        """
        url = self._log_url(name, role, index, job_attempt, task_attempt, stream)
        params = {"tail": tail} if tail is not None else None
        with self._transport.stream(url, params=params) as response:
            response.read()
            return response.text

    def follow_logs(
        self,
        name: str,
        role: str | None = None,
        index: int = 0,
        job_attempt: int | None = None,
        task_attempt: int | None = None,
        stream: LogStream = "all",
        tail: int | None = None,
        poll: float = 1.0,
    ) -> Iterator[str]:
        """The log's lines (without line ends) as the task writes them, until the attempt ends.

        A task that has not started yet is waited for (polling every `poll` seconds); one
        that never will (its job ended) raises `NotFoundError` (NoTaskLogError).

            for line in client.follow_logs("train", role="worker", index=1):
                print(line)
        """
        url = self._started_log_url(name, role, index, job_attempt, task_attempt, stream, poll)
        params: dict[str, str | int] = {"follow": "true"}
        if tail is not None:
            params["tail"] = tail
        with self._transport.stream(url, params=params, follow=True) as response:
            yield from response.iter_lines()

    def log_locations(
        self,
        name: str,
        role: str | None = None,
        index: int = 0,
        job_attempt: int | None = None,
        task_attempt: int | None = None,
    ) -> list[LogLocation]:
        """The log streams a task attempt has and where to read each one."""
        framework = self._framework_name(name)
        job = JobDetail.model_validate(self._transport.get(f"/jobs/{segment(framework)}"))
        role_name = _role(job, role)
        task = _task(job, role_name, index)
        job_attempt_id = job_attempt if job_attempt is not None else job.job_status.attempt_id
        task_attempt_id = task_attempt if task_attempt is not None else task.attempt_id
        path = (
            f"{task_path(framework, job_attempt_id or 0, role_name, index)}"
            f"/attempts/{segment(task_attempt_id or 0)}/logs"
        )
        body = self._transport.get(path)
        return [LogLocation.model_validate(item) for item in body["locations"]]

    def _log_url(
        self,
        name: str,
        role: str | None,
        index: int,
        job_attempt: int | None,
        task_attempt: int | None,
        stream: LogStream,
    ) -> str:
        locations = self.log_locations(name, role, index, job_attempt, task_attempt)
        for location in locations:
            if location.name == stream:
                return location.uri
        available = ", ".join(location.name for location in locations) or "none"
        raise InvalidArgumentError(f"the task has no {stream!r} log (available: {available})")

    def _started_log_url(
        self,
        name: str,
        role: str | None,
        index: int,
        job_attempt: int | None,
        task_attempt: int | None,
        stream: LogStream,
        poll: float,
    ) -> str:
        while True:
            try:
                return self._log_url(name, role, index, job_attempt, task_attempt, stream)
            except NotFoundError as error:
                if error.code != NO_TASK_LOG or self.job(name).finished:
                    raise
            time.sleep(poll)


def _role(job: JobDetail, role: str | None) -> str:
    roles = list(job.task_roles)
    if role is None:
        if len(roles) == 1:
            return roles[0]
        raise InvalidArgumentError(
            f"job '{job.full_name}' has roles {', '.join(roles)}: say which one"
        )
    if role not in job.task_roles:
        raise InvalidArgumentError(
            f"job '{job.full_name}' has no role {role!r} (roles: {', '.join(roles)})"
        )
    return role


def _task(job: JobDetail, role: str, index: int) -> TaskStatus:
    tasks = job.task_roles[role].task_statuses
    for task in tasks:
        if task.task_index == index:
            return task
    raise InvalidArgumentError(
        f"role {role!r} of job '{job.full_name}' has no task {index} (it has {len(tasks)})"
    )
