"""One job: its state and why, its tasks and where they run, their logs, its retries, tags
and config; stopping it. The job's figures are the API's own views of the job (`JobView`),
and every change goes through the API's handlers, so the portal can do exactly what the API
allows and nothing else."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from fastapi import Form, Query, Request, Response
from fastapi.responses import HTMLResponse

from pai.monitoring.history import UsageHistory
from pai.orchestrator.intents import FINAL_STATES, find_job
from pai.server.deps import Context
from pai.server.joblist import STATES
from pai.server.jobschemas import (
    ExecutionTypeRequest,
    JobAttemptDetail,
    JobDetail,
    JobEventInfo,
    TagRequest,
    TaskAttempts,
)
from pai.server.jobviews import JobView, job_attempt, job_attempts, task_logs_url
from pai.server.routes.jobs import (
    StreamName,
    list_job_events,
    set_execution_type,
    tag_job,
    task_log,
    untag_job,
)
from pai.web.capacity import has_gpus
from pai.web.interactive import TaskDoor, task_doors
from pai.web.notices import redirect_after
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormVisitor, Visitor
from pai.web.templating import render, render_fragment
from pai.web.usage import job_usage

router = portal_router()

LOG_TAIL_BYTES = 256 * 1024
"""How much of a log the page shows at first; the raw log link has all of it."""


@dataclass(frozen=True)
class LogSource:
    """A task attempt whose log can be shown."""

    label: str
    url: str
    """The task attempt's log locations; the stream's name follows it."""


@dataclass(frozen=True)
class JobState:
    """What the page shows of one job attempt."""

    detail: JobDetail
    attempts: list[JobAttemptDetail]
    tasks: list[TaskAttempts]
    """Every task of the attempt shown, with each of its attempts (its retry history)."""
    may_act: bool
    """The visitor owns the job or is an administrator: may stop, tag, clone, read logs."""
    config: str | None
    """The job as submitted, secrets masked; only for who may act."""
    doors: list[TaskDoor]
    """Ways into the running tasks (ssh, web ports); only for who may act."""

    @property
    def final(self) -> bool:
        return self.detail.jobStatus.state in FINAL_STATES

    @property
    def latest(self) -> bool:
        """Whether the attempt shown is the job's latest (attempts are oldest first)."""
        return self.attempts[-1].jobStatus.attemptId == self.attempt_id

    @property
    def task_counts(self) -> dict[str, int]:
        """How many tasks are in each state, in the order states are reached."""
        counts = Counter(
            task.taskState for role in self.detail.taskRoles.values() for task in role.taskStatuses
        )
        return {state: counts[state] for state in STATES if counts[state]}

    @property
    def tasks_retried(self) -> bool:
        return any(len(task.attempts) > 1 for task in self.tasks)

    @property
    def attempt_id(self) -> int:
        return self.detail.jobStatus.attemptId

    @property
    def log_sources(self) -> list[LogSource]:
        sources = []
        for task in self.tasks:
            several = len(task.attempts) > 1
            for attempt in reversed(task.attempts):
                if attempt.logs is None:
                    continue
                label = f"{task.taskRole} #{task.taskIndex}"
                if several:
                    label += f", attempt {attempt.attemptId}"
                sources.append(LogSource(label, attempt.logs))
        return sources

    @property
    def log_sources_json(self) -> str:
        return json.dumps([asdict(source) for source in self.log_sources])


def load_job(
    request: Request, context: Context, visitor: Visitor, framework_name: str, attempt: int | None
) -> JobState:
    controller = context.control_plane
    job_url = str(request.app.url_path_for("portal.job", framework_name=framework_name))
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        view = JobView(
            row,
            controller.exit_specs.current(),
            task_logs_url(job_url),
            controller.node_states(),
        )
        shown = job_attempt(row, attempt)
        may_act = visitor.principal.may_act_for(row.username)
        return JobState(
            detail=view.detail(shown),
            attempts=[view.attempt_detail(each) for each in job_attempts(row)],
            tasks=[
                view.task_attempts(shown, task)
                for task in sorted(shown.tasks.values(), key=lambda task: (task.role, task.index))
            ],
            may_act=may_act,
            config=row.job_text if may_act else None,
            doors=task_doors(row.spec, view.detail(shown), row.username) if may_act else [],
        )


Attempt = Annotated[int | None, Query(description="A job attempt; the latest by default.")]


@router.get("/jobs/{framework_name}", name="portal.job")
def job(
    framework_name: str,
    request: Request,
    context: Context,
    visitor: CurrentVisitor,
    attempt: Attempt = None,
) -> HTMLResponse:
    state = load_job(request, context, visitor, framework_name, attempt)
    events: list[JobEventInfo] = list_job_events(framework_name, context, visitor.principal).data
    return render(
        request,
        "job.html",
        nav="jobs",
        job=state,
        events=events,
        gpus=has_gpus(context),
        log_tail=LOG_TAIL_BYTES,
        usage=job_usage(context.service(UsageHistory), framework_name),
    )


@router.get("/jobs/{framework_name}/parts/{part}", name="portal.job_part")
def job_part(
    framework_name: str,
    part: Literal["status", "history", "usage"],
    request: Request,
    context: Context,
    visitor: CurrentVisitor,
    attempt: Attempt = None,
) -> HTMLResponse:
    """A part of the job page that changes while the job runs: its state and tasks, its
    retry history, or its resource use."""
    state = load_job(request, context, visitor, framework_name, attempt)
    return render_fragment(
        request,
        f"job_{part}.html",
        job=state,
        gpus=has_gpus(context),
        usage=job_usage(context.service(UsageHistory), framework_name),
    )


@router.post("/jobs/{framework_name}/stop", name="portal.stop_job")
def stop(framework_name: str, request: Request, context: Context, visitor: FormVisitor) -> Response:
    return redirect_after(
        _job_url(request, framework_name),
        lambda: (
            set_execution_type(
                framework_name, ExecutionTypeRequest(value="STOP"), context, visitor.principal
            ).message
        ),
    )


@router.post("/jobs/{framework_name}/tags", name="portal.tag_job")
def add_tag(
    framework_name: str,
    request: Request,
    context: Context,
    visitor: FormVisitor,
    tag: Annotated[str, Form()] = "",
) -> Response:
    return redirect_after(
        _job_url(request, framework_name),
        lambda: (
            tag_job(
                framework_name, TagRequest(value=tag.strip()), context, visitor.principal
            ).message
        ),
    )


@router.post("/jobs/{framework_name}/tags/remove", name="portal.untag_job")
def remove_tag(
    framework_name: str,
    request: Request,
    context: Context,
    visitor: FormVisitor,
    tag: Annotated[str, Form()] = "",
) -> Response:
    return redirect_after(
        _job_url(request, framework_name),
        lambda: (
            untag_job(framework_name, TagRequest(value=tag), context, visitor.principal).message
        ),
    )


@router.get(
    "/jobs/{framework_name}/attempts/{job_attempt_id}/taskRoles/{role}/taskIndex/{index}"
    "/attempts/{task_attempt_id}/logs/{stream}",
    name="portal.job_log",
)
def log(
    framework_name: str,
    job_attempt_id: int,
    role: str,
    index: int,
    task_attempt_id: int,
    stream: StreamName,
    context: Context,
    visitor: CurrentVisitor,
    tail: Annotated[int | None, Query(ge=0)] = None,
    follow: bool = False,
) -> Response:
    """A task attempt's log as plain text, streamed while it grows with `follow`: the API's
    log endpoint, reached with the portal's session."""
    return task_log(
        framework_name,
        job_attempt_id,
        role,
        index,
        task_attempt_id,
        stream,
        context,
        visitor.principal,
        tail=tail,
        follow=follow,
    )


def _job_url(request: Request, framework_name: str) -> str:
    return str(request.app.url_path_for("portal.job", framework_name=framework_name))
