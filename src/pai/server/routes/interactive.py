"""`GET /interactive-jobs`: the running jobs people work in (the ssh, tensorboard runtime
plugins) and how long each has been idle, so forgotten notebooks and shells can be found."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from sqlalchemy import select

from pai.monitoring.history import TASK, UsageHistory
from pai.monitoring.idleness import idle_since
from pai.protocol import JobSpec, runtime_plugins_for_role
from pai.server.deps import Caller, Context
from pai.server.errors import error_responses
from pai.store.models import JobRow

router = APIRouter(tags=["jobs"])

INTERACTIVE_PLUGINS = ("ssh", "tensorboard")


class InteractiveJob(BaseModel):
    name: str = Field(description="The job, `<user>~<job>`.")
    username: str
    virtualCluster: str
    plugins: list[str] = Field(description="Which of ssh and tensorboard it runs.")
    launchedTime: int | None = Field(description="ms since the epoch")
    idleSeconds: int | None = Field(
        description="How long no task has used CPU or GPU (under 1 %); null while busy."
    )


@router.get(
    "/interactive-jobs", response_model=list[InteractiveJob], responses=error_responses(401)
)
def interactive_jobs(
    context: Context,
    caller: Caller,
    username: Annotated[str | None, Query(description="Only this user's jobs.")] = None,
    idle: Annotated[bool, Query(description="Only the jobs idle right now.")] = False,
) -> list[InteractiveJob]:
    """Running jobs with the ssh or tensorboard plugin, oldest first (yours, or everybody's
    for an administrator)."""
    query = select(JobRow).where(JobRow.state == "RUNNING").order_by(JobRow.launched_at)
    if not caller.admin:
        query = query.where(JobRow.username == caller.username)
    if username is not None:
        query = query.where(JobRow.username == username)
    with context.database.reading() as session:
        rows = [
            (row.framework_name, row.username, row.virtual_cluster, row.spec, row.launched_at)
            for row in session.scalars(query)
        ]
    history = context.service(UsageHistory)
    now = datetime.now(UTC)
    found = []
    for name, user, vc, spec, launched in rows:
        plugins = _interactive_plugins(JobSpec.model_validate(spec))
        if not plugins:
            continue
        started = _utc(launched) if launched else now
        since = idle_since(history.series(TASK, name), started)
        if idle and since is None:
            continue
        found.append(
            InteractiveJob(
                name=name,
                username=user,
                virtualCluster=vc,
                plugins=plugins,
                launchedTime=int(started.timestamp() * 1000) if launched else None,
                idleSeconds=None if since is None else int((now - _utc(since)).total_seconds()),
            )
        )
    return found


def _interactive_plugins(spec: JobSpec) -> list[str]:
    used = {
        plugin.plugin for role in spec.task_roles for plugin in runtime_plugins_for_role(spec, role)
    }
    return [name for name in INTERACTIVE_PLUGINS if name in used]


def _utc(moment: datetime) -> datetime:
    """Times from SQLite come back naive; they are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
