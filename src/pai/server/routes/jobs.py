"""`/api/v2/jobs`: submit, list, inspect, stop and tag jobs; read their config, events and logs.

Handlers record what the user asks (a new job row, a stop request, a tag) and wake the
controller; they never move a job's state, the controller being its only writer. Every
logged-in user may list and inspect every job, as in OpenPAI; only the owner or an
administrator may read its config and logs or change it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from pai.auth.permissions import Principal
from pai.errors import (
    ForbiddenUserError,
    InvalidParametersError,
    InvalidProtocolError,
    NoJobConfigError,
    NoJobError,
    NoTaskLogError,
    PaiError,
)
from pai.executors.base import Executor, LogStream, UnknownTaskError
from pai.orchestrator.intents import (
    FINAL_STATES,
    PreparedJob,
    add_tag,
    find_job,
    prepare_job,
    record_job,
    remove_tag,
    request_stop,
)
from pai.protocol import MAX_DOCUMENT_BYTES
from pai.server.context import ServerContext
from pai.server.deps import Caller, Context, bearer_token
from pai.server.errors import error_response, error_responses
from pai.server.following import in_own_thread
from pai.server.joblist import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_OFFSET,
    ORDER_PATTERN,
    PRIORITY_PATTERN,
    STATE_PATTERN,
    JobListQuery,
)
from pai.server.jobschemas import (
    ExecutionTypeRequest,
    JobAttemptDetail,
    JobDetail,
    JobEventList,
    JobListItem,
    JobListWithCount,
    LogLocation,
    LogLocations,
    Submitted,
    TagRequest,
    TaskAttempts,
)
from pai.server.jobviews import (
    JobView,
    attempt_task,
    event_info,
    job_attempt,
    job_attempts,
    list_item,
    submitted_event,
    task_logs_url,
)
from pai.server.middleware import API_PREFIX
from pai.server.queueplace import QueuePlace, queue_place
from pai.server.schemas import Message
from pai.storage.jobs import attach_storages
from pai.store.models import JobEvent, JobRow

router = APIRouter(prefix="/jobs", tags=["jobs"])
JOBS_PATH = f"{API_PREFIX}/jobs"
SUBMISSION_ID_HEADER = "X-PAI-Submission-Id"
_SUBMISSION_ID = re.compile(r"[A-Za-z0-9-]{1,64}")

StreamName = Literal["stdout", "stderr", "all", "runtime"]
LOG_STREAMS: dict[StreamName, LogStream] = {
    "stdout": LogStream.STDOUT,
    "stderr": LogStream.STDERR,
    "all": LogStream.ALL,
    "runtime": LogStream.RUNTIME,
}
PLAIN_TEXT = "text/plain; charset=utf-8"
PREPARE_INLINE_BYTES = 64 * 1024
"""A job file up to this size is checked on the event loop (well under a millisecond's work per
kilobyte); a larger one in a thread, so as not to hold up other requests."""
LAUNCH_GRACE_SECONDS = 10.0
"""How long a follower waits for a placed task to be started by the executor (the controller
records a launch just before making it)."""

READ_ERRORS = error_responses(400, 401, 404)
OWNER_ERRORS = error_responses(400, 401, 403, 404)
JOB_DOCUMENT = {"type": "object", "description": "A job in OpenPAI's job protocol v2."}
JOB_BODY = {
    "requestBody": {
        "required": True,
        "description": "The job in OpenPAI's job protocol v2, as YAML (JSON is accepted too).",
        "content": {
            "text/yaml": {"schema": JOB_DOCUMENT},
            "application/json": {"schema": JOB_DOCUMENT},
        },
    }
}


async def read_job_text(request: Request) -> bytes:
    """The request body, refused as soon as it exceeds the size a job file may have."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            raise InvalidProtocolError(
                f"the job file is over {MAX_DOCUMENT_BYTES} bytes (1 MiB), the most a job may be"
            )
    return bytes(body)


JobText = Annotated[bytes, Depends(read_job_text)]


# -- submitting and listing -----------------------------------------------------------------------


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Submitted,
    responses=error_responses(400, 401, 403, 404, 409, 429, 503, 507),
    openapi_extra=JOB_BODY,
)
async def submit(caller: Caller, request: Request) -> Response:
    """Submit a job; it is WAITING until the scheduler places it. Every problem of the file is
    listed in `problems` with its line; a job that can never fit in its VC, or that names a
    storage its owner may not use (`extras.storages`), is refused now. A client that sends
    `X-PAI-Submission-Id` (up to 64 letters, digits and dashes) and sends the same submission
    again, not knowing whether the first arrived, is answered 202 again, not 409. While the
    store cannot take it (its disk full, or restarting) the answer is 507 or 503 with
    `Retry-After`, and nothing is recorded."""
    return await submission_response(caller, request)


async def submission_response(caller: Principal, request: Request) -> Response:
    """What `POST /jobs` answers: the job file of the request's body checked and recorded."""
    context: ServerContext = request.app.state.context
    submission_id = _submission_id(request.headers.get(SUBMISSION_ID_HEADER))
    submitted = await accept_job(
        caller, await read_job_text(request), context, submission_id=submission_id
    )
    return JSONResponse(submitted.model_dump(), status_code=status.HTTP_202_ACCEPTED)


def _submission_id(value: str | None) -> str | None:
    if value is None:
        return None
    if not _SUBMISSION_ID.fullmatch(value):
        raise InvalidParametersError(
            f"{SUBMISSION_ID_HEADER}: expected up to 64 letters, digits and dashes"
        )
    return value


SUBMIT_ROUTE = next(route for route in router.routes if getattr(route, "endpoint", None) is submit)


class SubmissionShortcut:
    """ASGI middleware that answers `POST /api/v2/jobs` itself when the caller's bearer token is
    remembered (`BearerCache`), the usual case: FastAPI's routing, dependency solving and
    exception middleware cost a submission a fifth of its time in the API worker. Any other
    submission (a token to read from the store, Basic credentials, a forged or expired token)
    takes the `submit` route, which answers it by the same `submission_response`.

    It belongs inside the platform's own middleware (request log, path rules): see
    `create_app(inner_middleware=...)`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = None
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == JOBS_PATH:
            caller = _remembered_caller(scope)
        if caller is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = SUBMIT_ROUTE  # what the route would have set, for per-route metrics
        request = Request(scope, receive)
        try:
            response = await submission_response(caller, request)
        except PaiError as refused:
            response = error_response(refused)
        await response(scope, receive, send)


def _remembered_caller(scope: Scope) -> Principal | None:
    token = bearer_token(Headers(scope=scope).get("authorization", ""))
    if token is None:
        return None
    context: ServerContext = scope["app"].state.context
    try:
        return context.remembered_caller(token)
    except PaiError:  # forged or expired: the route explains
        return None


async def accept_job(
    caller: Principal, text: bytes, context: ServerContext, *, submission_id: str | None = None
) -> Submitted:
    """Check a job file and record it (what `POST /jobs`, the portal and the marketplace do).

    The check reads nothing from the store and runs on the event loop, unless the file is
    large; the job is then written with others arriving at the same time (`SubmissionIntake`).
    Storages are checked against the store, in the transaction that records the job."""
    controller = context.control_plane

    def prepare() -> PreparedJob:
        return prepare_job(
            controller.cluster,
            controller.secret_box,
            username=caller.username,
            text=text,
            may_use_vc=caller.may_use_virtual_cluster,
            submission_id=submission_id,
        )

    job = prepare() if len(text) <= PREPARE_INLINE_BYTES else await run_in_threadpool(prepare)
    if job.mounts_storages:
        await run_in_threadpool(_record_with_storages, context, caller, job, text)
    else:
        await context.intake.record(job)
    return Submitted(
        status=status.HTTP_202_ACCEPTED,
        message=f"job {job.framework_name} accepted",
        name=job.framework_name,
    )


def _record_with_storages(
    context: ServerContext, caller: Principal, job: PreparedJob, text: bytes
) -> None:
    with context.database.session() as session:
        context.submission_limiter.acquire(session, caller.username)
        attach_storages(session, record_job(session, job), caller, text)
    context.control_plane.wake()


@router.get(
    "",
    response_model=list[JobListItem] | JobListWithCount,
    responses=error_responses(400, 401),
)
def list_jobs(
    context: Context,
    _caller: Caller,
    username: Annotated[str | None, Query(description="Users, comma-separated.")] = None,
    vc: Annotated[str | None, Query(description="Virtual clusters, comma-separated.")] = None,
    state: Annotated[
        str | None, Query(description="States, comma-separated.", pattern=STATE_PATTERN)
    ] = None,
    keyword: Annotated[
        str | None, Query(description="Part of the user, job or VC name.", max_length=255)
    ] = None,
    tagsContain: Annotated[str | None, Query(description="Any of these tags.")] = None,
    tagsNotContain: Annotated[str | None, Query(description="None of these tags.")] = None,
    jobPriority: Annotated[
        str | None,
        Query(
            description="prod, test, oppo; `default` is the default class (test).",
            pattern=PRIORITY_PATTERN,
        ),
    ] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    order: Annotated[
        str | None,
        Query(
            description="`field,ASC|DESC`; default `submissionTime,DESC`.", pattern=ORDER_PATTERN
        ),
    ] = None,
    withTotalCount: bool = False,
) -> list[JobListItem] | JobListWithCount:
    """Every job matching all the filters (each filter matches any of its values)."""
    query = JobListQuery.parse(
        username=username,
        vc=vc,
        state=state,
        keyword=keyword,
        tags_contain=tagsContain,
        tags_not_contain=tagsNotContain,
        job_priority=jobPriority,
        offset=offset,
        limit=limit,
        order=order,
    )
    with context.database.reading() as session:
        items = [list_item(job, tags) for job, tags in query.page(session)]
        if withTotalCount:
            return JobListWithCount(totalCount=query.count(session), data=items)
    return items


# -- one job --------------------------------------------------------------------------------------


@router.get("/{framework_name}", response_model=JobDetail, responses=READ_ERRORS)
def get_job(framework_name: str, request: Request, context: Context, _caller: Caller) -> JobDetail:
    """The job's latest attempt with every task; `waitReason` says why it is WAITING."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        place = queue_place(session, row, context.control_plane.fairness())
        return _view(request, context, row, place).detail(job_attempt(row))


@router.get(
    "/{framework_name}/attempts/{job_attempt_id}",
    response_model=JobDetail,
    responses=READ_ERRORS,
)
def get_job_attempt(
    framework_name: str, job_attempt_id: int, request: Request, context: Context, _caller: Caller
) -> JobDetail:
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        return _view(request, context, row).detail(job_attempt(row, job_attempt_id))


@router.get(
    "/{framework_name}/job-attempts", response_model=list[JobAttemptDetail], responses=READ_ERRORS
)
def list_job_attempts(
    framework_name: str, request: Request, context: Context, _caller: Caller
) -> list[JobAttemptDetail]:
    """Every attempt of the job, oldest first; the latest has `isLatest: true`."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        view = _view(request, context, row)
        return [view.attempt_detail(attempt) for attempt in job_attempts(row)]


@router.get("/{framework_name}/job-attempts/healthz", response_model=Message)
def job_attempts_healthz(framework_name: str) -> Message:
    """Job attempts live with the jobs in the store, so they are available whenever it is."""
    return Message(message="ok")


@router.get(
    "/{framework_name}/job-attempts/{job_attempt_id}",
    response_model=JobAttemptDetail,
    responses=READ_ERRORS,
)
def get_job_attempt_entry(
    framework_name: str, job_attempt_id: int, request: Request, context: Context, _caller: Caller
) -> JobAttemptDetail:
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        return _view(request, context, row).attempt_detail(job_attempt(row, job_attempt_id))


@router.get(
    "/{framework_name}/attempts/{job_attempt_id}/taskRoles/{role}/taskIndex/{index}/attempts",
    response_model=TaskAttempts,
    responses=READ_ERRORS,
)
def get_task_attempts(
    framework_name: str,
    job_attempt_id: int,
    role: str,
    index: int,
    request: Request,
    context: Context,
    _caller: Caller,
) -> TaskAttempts:
    """A task's attempts within one job attempt: its retry history, with where each ran."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        attempt = job_attempt(row, job_attempt_id)
        return _view(request, context, row).task_attempts(
            attempt, attempt_task(row, attempt, role, index)
        )


@router.get(
    "/{framework_name}/config",
    response_class=Response,
    responses={
        200: {"content": {"text/yaml": {"schema": JOB_DOCUMENT}}},
        **error_responses(401, 403, 404),
    },
)
def get_job_config(framework_name: str, context: Context, caller: Caller) -> Response:
    """The job file as submitted, with secret values shown as `******`. Owner or admin."""
    with context.database.reading() as session:
        try:
            row = find_job(session, framework_name)
        except NoJobError:
            raise NoJobConfigError(f"no config of job '{framework_name}': no such job") from None
        _require_owner(caller, row, "read the config of")
        return Response(row.job_text, media_type="text/yaml")


@router.put(
    "/{framework_name}/executionType",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Message,
    responses=OWNER_ERRORS,
)
def set_execution_type(
    framework_name: str, body: ExecutionTypeRequest, context: Context, caller: Caller
) -> Message:
    """`STOP` stops the job (it ends STOPPED, never retried). `START` changes nothing on a
    job that runs; a stopped or finished job is not started again (submit it anew)."""
    controller = context.control_plane
    with context.database.session() as session:
        row = find_job(session, framework_name)
        _require_owner(caller, row, "stop or start")
        if body.value == "START":
            if row.state in FINAL_STATES or row.stop_requested_at is not None:
                raise InvalidParametersError(
                    f"job '{framework_name}' is {row.state} after a stop or its end and cannot "
                    "be started again; submit it again under a new name"
                )
            return Message(message=f"job '{framework_name}' is already started")
        if row.state in FINAL_STATES:
            return Message(message=f"job '{framework_name}' has already ended ({row.state})")
        request_stop(session, row)
    controller.wake()
    return Message(message=f"job '{framework_name}' is being stopped")


@router.put("/{framework_name}/tag", response_model=Message, responses=OWNER_ERRORS)
def tag_job(framework_name: str, body: TagRequest, context: Context, caller: Caller) -> Message:
    with context.database.session() as session:
        row = find_job(session, framework_name)
        _require_owner(caller, row, "tag")
        add_tag(row, body.value)
    return Message(message=f"job '{framework_name}' is tagged '{body.value}'")


@router.delete("/{framework_name}/tag", response_model=Message, responses=OWNER_ERRORS)
def untag_job(framework_name: str, body: TagRequest, context: Context, caller: Caller) -> Message:
    with context.database.session() as session:
        row = find_job(session, framework_name)
        _require_owner(caller, row, "untag")
        remove_tag(row, body.value)
    return Message(message=f"tag '{body.value}' is removed from job '{framework_name}'")


@router.get("/{framework_name}/events", response_model=JobEventList, responses=READ_ERRORS)
def list_job_events(
    framework_name: str,
    context: Context,
    _caller: Caller,
    kind: Annotated[Literal["Normal", "Warning"] | None, Query(alias="type")] = None,
) -> JobEventList:
    """What happened to the job and its tasks, oldest first; `type` keeps one kind."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        statement = select(JobEvent).where(JobEvent.job_id == row.id).order_by(JobEvent.id)
        if kind is not None:
            statement = statement.where(JobEvent.type == kind)
        events = [submitted_event(row)] if kind in (None, "Normal") else []
        events += [event_info(row.framework_name, event) for event in session.scalars(statement)]
    return JobEventList(totalCount=len(events), data=events)


# -- logs -----------------------------------------------------------------------------------------

TASK_ATTEMPT_PATH = (
    "/{framework_name}/attempts/{job_attempt_id}/taskRoles/{role}/taskIndex/{index}"
    "/attempts/{task_attempt_id}/logs"
)


@router.get(
    TASK_ATTEMPT_PATH, response_model=LogLocations, responses=error_responses(401, 403, 404)
)
def task_log_locations(
    framework_name: str,
    job_attempt_id: int,
    role: str,
    index: int,
    task_attempt_id: int,
    request: Request,
    context: Context,
    caller: Caller,
) -> LogLocations:
    """Where each log stream of a task attempt can be read. Owner or admin."""
    _task_log_key(context, caller, framework_name, job_attempt_id, role, index, task_attempt_id)
    path = {
        "framework_name": framework_name,
        "job_attempt_id": job_attempt_id,
        "role": role,
        "index": index,
        "task_attempt_id": task_attempt_id,
    }
    return LogLocations(
        locations=[
            LogLocation(name=name, uri=str(request.url_for("task_log", **path, stream=name)))
            for name in LOG_STREAMS
        ]
    )


@router.get(
    TASK_ATTEMPT_PATH + "/{stream}",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **error_responses(400, 401, 403, 404),
    },
)
def task_log(
    framework_name: str,
    job_attempt_id: int,
    role: str,
    index: int,
    task_attempt_id: int,
    stream: StreamName,
    context: Context,
    caller: Caller,
    tail: Annotated[int | None, Query(ge=0, description="Only the last bytes.")] = None,
    follow: Annotated[
        bool, Query(description="Stream the log as it grows, until the task attempt ends.")
    ] = False,
) -> Response:
    """A task attempt's log as text. Owner or admin."""
    key = _task_log_key(
        context, caller, framework_name, job_attempt_id, role, index, task_attempt_id
    )
    executor = context.executor
    if follow:
        chunks = _follow_log(executor, key, LOG_STREAMS[stream], tail)
        return StreamingResponse(in_own_thread(chunks), media_type=PLAIN_TEXT)
    try:
        content = executor.logs(key, LOG_STREAMS[stream], tail=tail)
    except UnknownTaskError:  # placed, and about to be started
        content = b""
    return Response(content, media_type=PLAIN_TEXT)


def _task_log_key(
    context: Context,
    caller: Caller,
    framework_name: str,
    job_attempt_id: int,
    role: str,
    index: int,
    task_attempt_id: int,
) -> str:
    """The executor's key of a task attempt whose logs the caller may read."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        _require_owner(caller, row, "read the logs of")
        attempt = job_attempt(row, job_attempt_id)
        task = attempt_task(row, attempt, role, index)
    for task_attempt in task.attempts:
        if task_attempt.attempt_id == task_attempt_id and task_attempt.placement is not None:
            key: str = task_attempt.placement["key"]
            return key
    raise NoTaskLogError(
        f"task {role} #{index} of attempt {job_attempt_id} of job '{framework_name}' has no "
        f"attempt {task_attempt_id} that started, so it has no log"
    )


def _follow_log(
    executor: Executor, key: str, stream: LogStream, tail: int | None
) -> Iterator[bytes]:
    deadline = time.monotonic() + LAUNCH_GRACE_SECONDS
    while True:
        try:
            chunks = executor.follow_logs(key, stream, tail=tail)
            break
        except UnknownTaskError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
    yield from chunks


# -- helpers --------------------------------------------------------------------------------------


def _view(
    request: Request, context: Context, row: JobRow, queue: QueuePlace | None = None
) -> JobView:
    job_url = str(request.url_for("get_job", framework_name=row.framework_name))
    plane = context.control_plane
    return JobView(
        row, plane.exit_specs.current(), task_logs_url(job_url), plane.node_states(), queue
    )


def _require_owner(caller: Caller, row: JobRow, action: str) -> None:
    if not caller.may_act_for(row.username):
        raise ForbiddenUserError(
            f"only {row.username} (the owner) or an administrator may {action} job "
            f"'{row.framework_name}'"
        )
