"""Submitting, listing, inspecting, stopping, tagging and waiting for jobs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pai.sdk.base import ApiBase
from pai.sdk.errors import WaitTimeoutError
from pai.sdk.job_models import (
    JobDetail,
    JobEvent,
    JobInfo,
    JobSubmission,
    TaskAttempts,
)
from pai.sdk.names import segment
from pai.sdk.submission import JobSource, job_request

SUBMISSION_ID_HEADER = "X-PAI-Submission-Id"
"""Names a submission, so that sending it again is answered as the first was."""

Filter = str | Sequence[str] | None
"""One value or several (sent comma-separated, as OpenPAI's list API takes them)."""


class JobsApi(ApiBase):
    """Methods for jobs. A job is named `user~job`, or just `job` for the caller's own."""

    def submit(
        self,
        job: JobSource,
        parameters: Mapping[str, Any] | None = None,
        virtual_cluster: str | None = None,
    ) -> JobSubmission:
        """Submit a job: YAML text, a `pathlib.Path` to a job file, or the job as a dict.

        `parameters` override values the job declares in `parameters` (an undeclared name is
        an `InvalidArgumentError`); `virtual_cluster` replaces `defaults.virtualCluster`.
        An invalid job raises `InvalidProtocolError` whose `problems` locate each issue.

            submitted = client.submit(Path("train.yaml"), parameters={"epochs": 10})
            job = client.wait(submitted.name)
        """
        request = job_request(job, parameters, virtual_cluster)
        headers = {"Content-Type": request.content_type, SUBMISSION_ID_HEADER: uuid.uuid4().hex}
        # Named, the submission may be sent again while the server cannot answer (its store
        # restarting): one that arrived the first time is then answered as accepted again.
        response = self._transport.request(
            "POST", "/jobs", content=request.content, headers=headers, repeatable=True
        )
        return JobSubmission.model_validate(response.json())

    def jobs(
        self,
        *,
        username: Filter = None,
        vc: Filter = None,
        state: Filter = None,
        keyword: str | None = None,
        tags_contain: Filter = None,
        tags_not_contain: Filter = None,
        job_priority: Filter = None,
        offset: int | None = None,
        limit: int | None = None,
        order: str | None = None,
    ) -> list[JobInfo]:
        """Jobs matching every given filter, newest first unless `order` says otherwise.

        `order` is `field,ASC|DESC` (submissionTime, jobName, username, vc, state, ...).

            running = client.jobs(username="alice", state=["RUNNING", "WAITING"])
        """
        filters: dict[str, Filter | int] = {
            "username": username,
            "vc": vc,
            "state": state,
            "keyword": keyword,
            "tagsContain": tags_contain,
            "tagsNotContain": tags_not_contain,
            "jobPriority": job_priority,
            "offset": offset,
            "limit": limit,
            "order": order,
        }
        params = {key: _query_value(value) for key, value in filters.items() if value is not None}
        body = self._transport.get("/jobs", params=params)
        items = body["data"] if isinstance(body, dict) else body
        return [JobInfo.model_validate(item) for item in items]

    def job(self, name: str) -> JobDetail:
        """A job with its status and every task; `NotFoundError` (NoJobError) if none."""
        return JobDetail.model_validate(self._transport.get(self._job_path(name)))

    def job_config(self, name: str) -> str:
        """The YAML the job was submitted with, secrets shown as `******` (owner or admin)."""
        return self._transport.request("GET", f"{self._job_path(name)}/config").text

    def stop(self, name: str) -> str:
        """Ask the server to stop a job (owner or admin); `wait` sees it end as STOPPED.

        Asking twice is asking once, so the request is tried again while the server's store is
        away (503, 507) or no answer comes, as a submission is."""
        path = f"{self._job_path(name)}/executionType"
        answer = self._transport.request("PUT", path, json={"value": "STOP"}, repeatable=True)
        return str(answer.json().get("message", ""))

    def tag(self, name: str, tag: str) -> None:
        """Add a tag to a job (owner or admin)."""
        self._transport.request("PUT", f"{self._job_path(name)}/tag", json={"value": tag})

    def untag(self, name: str, tag: str) -> None:
        """Remove a tag from a job; `NotFoundError` (NoTagError) if it has no such tag."""
        self._transport.request("DELETE", f"{self._job_path(name)}/tag", json={"value": tag})

    def events(self, name: str, type: str | None = None) -> list[JobEvent]:
        """What happened to the job's tasks; `type` is `Normal` or `Warning` to keep one kind."""
        params = {"type": type} if type else None
        body = self._transport.get(f"{self._job_path(name)}/events", params=params)
        items = body["data"] if isinstance(body, dict) else body
        return [JobEvent.model_validate(item) for item in items]

    def job_attempts(self, name: str) -> list[JobDetail]:
        """Every attempt of the job (a job retry starts a new one); the latest has
        `is_latest`."""
        body = self._transport.get(f"{self._job_path(name)}/job-attempts")
        return [JobDetail.model_validate(item) for item in body]

    def job_attempt(self, name: str, attempt: int) -> JobDetail:
        """One attempt of the job, by its attempt id."""
        path = f"{self._job_path(name)}/job-attempts/{segment(attempt)}"
        return JobDetail.model_validate(self._transport.get(path))

    def task_attempts(
        self, name: str, role: str, index: int = 0, job_attempt: int | None = None
    ) -> TaskAttempts:
        """A task's attempts (its retry history) in one job attempt (default: the latest)."""
        fw = self._framework_name(name)
        attempt = job_attempt if job_attempt is not None else self._latest_attempt(fw)
        path = f"{task_path(fw, attempt, role, index)}/attempts"
        return TaskAttempts.model_validate(self._transport.get(path))

    def wait(
        self,
        name: str,
        timeout: float | None = None,
        poll: float = 1.0,
        on_update: Callable[[JobDetail], None] | None = None,
    ) -> JobDetail:
        """Poll until the job is SUCCEEDED, FAILED or STOPPED and return it.

        `on_update(job)` runs on the first poll and whenever the job's state, retries or task
        states change. After `timeout` seconds, `WaitTimeoutError` carries the last state seen.

            job = client.wait("hello", timeout=600, on_update=lambda j: print(j.state))
            assert job.state == "SUCCEEDED"
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: tuple[Any, ...] | None = None
        while True:
            job = self.job(name)
            progress = _progress(job)
            if on_update is not None and progress != seen:
                on_update(job)
            seen = progress
            if job.finished:
                return job
            remaining = poll if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeoutError(
                    f"job '{job.full_name}' is still {job.state} after {timeout:g} s", job
                )
            time.sleep(min(poll, remaining))

    def _job_path(self, name: str) -> str:
        return f"/jobs/{segment(self._framework_name(name))}"

    def _latest_attempt(self, framework: str) -> int:
        status = self._transport.get(f"/jobs/{segment(framework)}")["jobStatus"]
        return int(status.get("attemptId") or 0)


def task_path(framework: str, job_attempt: int, role: str, index: int) -> str:
    return (
        f"/jobs/{segment(framework)}/attempts/{segment(job_attempt)}"
        f"/taskRoles/{segment(role)}/taskIndex/{segment(index)}"
    )


def _query_value(value: Filter | int) -> str | int:
    if isinstance(value, str | int):
        return value
    return ",".join(value or ())


def _progress(job: JobDetail) -> tuple[Any, ...]:
    """What `wait` reports a change of."""
    tasks = tuple((role, task.task_index, task.task_state) for role, task in job.tasks())
    return (job.state, job.job_status.retries, tasks)
