"""What users ask of jobs, recorded for the controller: submit, stop, tag.

These run in API request handlers. They check the request completely before writing anything
(a refused submission leaves no row behind) and never move a job's state themselves: the
controller reads the recorded intent and is the only one to act on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from pai.auth.sealing import SecretBox
from pai.cluster.model import ClusterConfig
from pai.errors import (
    ConflictJobError,
    ForbiddenUserError,
    InvalidParametersError,
    InvalidProtocolError,
    NoJobError,
    NoTagError,
    NoVirtualClusterError,
)
from pai.protocol import (
    JobSpec,
    Problem,
    ProtocolError,
    field_problem,
    parse_submitted_job,
    registry_passwords_as_secrets,
    rendered_job_dict,
    runtime_plugins_for_role,
)
from pai.runtime.plugins import PluginError, build_task_script
from pai.scheduler.requests import RequestRefused, job_requests
from pai.storage.jobs import named_storages
from pai.store.models import JobRow, JobTag, NodeCordon, NodeEvent
from pai.store.recordsets import json_rows, rows_documents
from pai.store.types import utcnow

FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


@dataclass(frozen=True)
class PreparedJob:
    """A job file checked for its submitter, with its `jobs` row's values: all a submission
    computes before it writes (on SQLite the first statement takes the write lock, which is
    then held only for the insert)."""

    values: dict[str, Any]

    @property
    def username(self) -> str:
        return str(self.values["username"])

    @property
    def name(self) -> str:
        return str(self.values["name"])

    @property
    def framework_name(self) -> str:
        return f"{self.username}~{self.name}"

    @property
    def submission_id(self) -> str | None:
        return self.values.get("submission_id")

    @property
    def mounts_storages(self) -> bool:
        """Whether the job names storages (`extras.storages`), which are checked and
        recorded with it (`pai.storage.jobs.attach_storages`)."""
        return named_storages(self.values["spec"]) is not None


def prepare_job(
    cluster: ClusterConfig,
    box: SecretBox,
    *,
    username: str,
    text: str | bytes,
    may_use_vc: Callable[[str], bool],
    submission_id: str | None = None,
) -> PreparedJob:
    """Validate a job file for `username`, reading nothing from the store. `submission_id` is
    the client's name for this submission, if it gave one (see `record_jobs`)."""
    try:
        submitted = parse_submitted_job(text)
    except ProtocolError as invalid:
        raise InvalidProtocolError(invalid.summary(), problems=_listed(invalid.problems)) from None
    spec = registry_passwords_as_secrets(submitted.spec)
    vc = spec.virtual_cluster
    if vc not in cluster.virtual_clusters:
        known = ", ".join(sorted(cluster.virtual_clusters))
        raise NoVirtualClusterError(f"virtual cluster '{vc}' does not exist (VCs: {known})")
    if not may_use_vc(vc):
        raise ForbiddenUserError(
            f"user '{username}' may not submit to virtual cluster '{vc}': none of the user's "
            "groups grants it (ask an administrator)"
        )
    framework_name = f"{username}~{spec.name}"
    try:
        job_requests(spec, cluster, framework_name)
    except RequestRefused as refused:
        located = [field_problem(text, problem) for problem in refused.problems]
        raise InvalidProtocolError(
            f"job '{spec.name}' can never run on this cluster: " + "; ".join(refused.problems),
            problems=_listed(problem for problem in located if problem is not None),
        ) from None
    _check_plugins(spec)
    return PreparedJob(
        {
            "username": username,
            "name": spec.name,
            "virtual_cluster": vc,
            "priority_class": spec.priority_class,
            "job_text": submitted.masked_text,
            "spec": rendered_job_dict(spec),
            "sealed_secrets": box.seal(spec.secrets) if spec.secrets else None,
            "total_tasks": spec.total_tasks,
            "total_gpus": spec.total_gpus,
            "total_roles": len(spec.task_roles),
            "allocations": [],
            "submission_id": submission_id,
        }
    )


def record_job(session: Session, job: PreparedJob) -> JobRow:
    """Record one prepared job; a name its user already has is found by the table's unique
    constraint, which holds under concurrent submissions. The same submission sent again
    (the same submission id) finds the job it recorded."""
    try:
        with session.begin_nested():
            row = JobRow(**job.values)
            session.add(row)
    except IntegrityError:
        earlier = find_job(session, job.framework_name)
        if job.submission_id is None or earlier.submission_id != job.submission_id:
            raise _conflict(job) from None
        return earlier
    return row


def record_jobs(session: Session, jobs: Sequence[PreparedJob]) -> list[ConflictJobError | None]:
    """Record many prepared jobs with one statement; for each, None or why it was not recorded
    (its user has a job of that name, perhaps an earlier one of `jobs`)."""
    if not jobs:
        return []
    if session.get_bind().dialect.name == "postgresql":
        # One parameter for all the rows (see `pai.store.recordsets`), which carries what the
        # columns' defaults would have given.
        rows = [{**_JOB_DEFAULTS, **job.values, "submitted_at": utcnow()} for job in jobs]
        results = [
            session.connection().execute(_INSERT_JOBS_FROM_DOCUMENT, parameters)
            for parameters in rows_documents(rows)
        ]
    else:
        # Many parameter sets for one statement: the driver sends them as multi-row VALUES.
        results = [session.connection().execute(_INSERT_JOBS, [job.values for job in jobs])]
    recorded = {(username, name) for result in results for username, name in result}
    outcomes: list[ConflictJobError | None] = []
    refused: list[PreparedJob] = []
    for job in jobs:
        key = (job.username, job.name)
        if key in recorded:
            outcomes.append(None)
            recorded.discard(key)  # a second job of the same name in `jobs` was not recorded
        else:
            outcomes.append(_conflict(job))
            refused.append(job)
    sent_again = _sent_again(session, refused)
    return [
        None if outcome is not None and job.framework_name in sent_again else outcome
        for job, outcome in zip(jobs, outcomes, strict=True)
    ]


def _sent_again(session: Session, refused: Sequence[PreparedJob]) -> set[str]:
    """Of jobs refused for their names, those recorded before under the same submission id:
    sent again by a client that did not learn the first one's answer."""
    named = [job for job in refused if job.submission_id is not None]
    if not named:
        return set()
    rows = session.execute(
        select(JobRow.username, JobRow.name, JobRow.submission_id).where(
            JobRow.username.in_({job.username for job in named}),
            JobRow.name.in_({job.name for job in named}),
        )
    ).all()
    ids = {(row.username, row.name): row.submission_id for row in rows}
    return {
        job.framework_name
        for job in named
        if ids.get((job.username, job.name)) == job.submission_id
    }


_JOBS = JobRow.metadata.tables[JobRow.__tablename__]
_INSERT_JOBS = (
    sqlite.insert(_JOBS)
    .on_conflict_do_nothing(index_elements=["username", "name"])
    .returning(_JOBS.c.username, _JOBS.c.name)
)
"""On SQLite: the jobs of the parameter sets inserted, but those whose user has a job of its
name."""
_JOB_DEFAULTS = {
    column.name: column.default.arg
    for column in _JOBS.columns
    if isinstance(column.default, ScalarElementColumnDefault)
}
"""What a new row holds in the columns the API leaves to the controller (state, retries)."""
_INSERTED = [column for column in _JOBS.columns if column.name != "id"]
_NEW_JOBS = json_rows(_INSERTED, name="new_jobs")
_INSERT_JOBS_FROM_DOCUMENT = (
    postgresql.insert(_JOBS)
    .from_select([column.name for column in _INSERTED], select(*_NEW_JOBS.columns))
    .on_conflict_do_nothing(index_elements=["username", "name"])
    .returning(_JOBS.c.username, _JOBS.c.name)
)
"""On PostgreSQL: the rows of a document of `rows_documents` inserted, but those whose user
has a job of its name."""


def _conflict(job: PreparedJob) -> ConflictJobError:
    return ConflictJobError(f"job '{job.framework_name}' already exists; choose another name")


def _listed(problems: Iterable[Problem]) -> list[dict[str, Any]]:
    """Problems as the API's error body lists them."""
    return [
        {"path": p.path, "message": p.message, "line": p.line, "column": p.column} for p in problems
    ]


def request_stop(session: Session, job: JobRow) -> None:
    """Record that the job must stop; stopping a finished job changes nothing."""
    if job.state in FINAL_STATES or job.stop_requested_at is not None:
        return
    job.stop_requested_at = datetime.now(UTC)


def add_tag(job: JobRow, tag: str) -> None:
    _check_tag(tag)
    if all(existing.tag != tag for existing in job.tags):
        job.tags.append(JobTag(tag=tag))


def remove_tag(job: JobRow, tag: str) -> None:
    for existing in job.tags:
        if existing.tag == tag:
            job.tags.remove(existing)
            return
    raise NoTagError(f"job '{job.framework_name}' has no tag '{tag}'")


def find_job(session: Session, framework_name: str) -> JobRow:
    """The job named `<user>~<job>`, or NoJobError."""
    username, sep, name = framework_name.partition("~")
    job = _find(session, username, name) if sep else None
    if job is None:
        raise NoJobError(f"job '{framework_name}' not found")
    return job


def _find(session: Session, username: str, name: str) -> JobRow | None:
    return session.scalars(
        select(JobRow).where(JobRow.username == username, JobRow.name == name)
    ).one_or_none()


def _check_tag(tag: str) -> None:
    if not tag or "," in tag or len(tag) > 255:
        raise InvalidParametersError("a tag is 1-255 characters and has no comma")


def _check_plugins(spec: JobSpec) -> None:
    """Runtime plugins PAI cannot run are refused now rather than failing every launch."""
    for role in spec.task_roles:
        try:
            build_task_script([], runtime_plugins_for_role(spec, role), {})
        except PluginError as unsupported:
            raise InvalidProtocolError(f"task role '{role}': {unsupported}") from None


def cordon(session: Session, node: str, by: str, reason: str) -> bool:
    """Record that nothing new goes on `node` (the controller reads it); False if it was
    cordoned already."""
    if session.get(NodeCordon, node) is not None:
        return False
    session.add(NodeCordon(node=node, by=by, reason=reason))
    session.add(
        NodeEvent(
            node=node, type="Warning", reason="Cordoned", message=f"cordoned by {by}: {reason}"
        )
    )
    return True


def uncordon(session: Session, node: str, by: str) -> bool:
    """Let tasks go on `node` again; False if it was not cordoned."""
    found = session.get(NodeCordon, node)
    if found is None:
        return False
    session.delete(found)
    session.add(
        NodeEvent(node=node, type="Normal", reason="Uncordoned", message=f"uncordoned by {by}")
    )
    return True
