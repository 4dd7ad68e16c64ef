"""`GET /jobs`: OpenPAI's filters, paging and ordering, answered from indexes.

A page is found by its job ids first, which the indexes of the filtered columns in
submission order answer without reading a job (migration 0003); only the page's jobs are
then read, and of them only what a list item shows (never the job text, and two small values
of the state machine). Tags come in a second query, the total count, when asked for, in a
third: a sum over the counts per user, VC and state that triggers keep (migration 0007), unless
the filters go beyond those (keyword, tags, priority), which count the matching jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select
from sqlalchemy.orm import Session

from pai.errors import InvalidParametersError
from pai.server.jobviews import JobSummary
from pai.store.models import JobCount, JobRow, JobTag

DEFAULT_LIMIT = 5000
MAX_LIMIT = 50000
MAX_OFFSET = 2**63 - 1
"""The largest offset both databases take (a signed 64-bit integer)."""
STATES = ("WAITING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED", "UNKNOWN")
PRIORITIES = ("prod", "test", "oppo")
DEFAULT_PRIORITY = "test"
"""OpenPAI's `jobPriority=default` means "no priority class given": here, the default class."""

ORDER_FIELDS = {
    "submissionTime": JobRow.submitted_at,
    "jobName": JobRow.name,
    "username": JobRow.username,
    "vc": JobRow.virtual_cluster,
    "retries": JobRow.retries,
    "totalTaskNumber": JobRow.total_tasks,
    "totalGpuNumber": JobRow.total_gpus,
    "state": JobRow.state,
    "completionTime": JobRow.completed_at,
    "jobPriority": JobRow.priority_class,
}

_SUMMARY_COLUMNS = (
    JobRow.id,
    JobRow.username,
    JobRow.name,
    JobRow.state,
    JobRow.sub_state,
    JobRow.execution_type,
    JobRow.retries,
    JobRow.status["retry"].label("retry"),
    JobRow.status["retryAt"].as_float().label("retry_at"),
    JobRow.status[("attempt", "completedAt")].as_float().label("attempt_completed_at"),
    JobRow.submitted_at,
    JobRow.launched_at,
    JobRow.completed_at,
    JobRow.exit_code,
    JobRow.virtual_cluster,
    JobRow.total_gpus,
    JobRow.total_tasks,
    JobRow.total_roles,
    JobRow.priority_class,
)


@dataclass(frozen=True)
class JobListQuery:
    """A validated `GET /jobs` request. Each filter with several values matches any of them;
    different filters must all match."""

    usernames: tuple[str, ...] = ()
    virtual_clusters: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    keyword: str = ""
    tags_contain: tuple[str, ...] = ()
    tags_not_contain: tuple[str, ...] = ()
    priorities: tuple[str, ...] = ()
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    order_field: str = "submissionTime"
    descending: bool = True

    @classmethod
    def parse(
        cls,
        *,
        username: str | None = None,
        vc: str | None = None,
        state: str | None = None,
        keyword: str | None = None,
        tags_contain: str | None = None,
        tags_not_contain: str | None = None,
        job_priority: str | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
        order: str | None = None,
    ) -> JobListQuery:
        """Read the query parameters as OpenPAI spells them; InvalidParametersError names the
        parameter that is wrong."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidParametersError(f"limit: must be between 1 and {MAX_LIMIT}, got {limit}")
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidParametersError(
                f"offset: must be between 0 and {MAX_OFFSET}, got {offset}"
            )
        order_field, descending = _order(order)
        priorities = _checked("jobPriority", _values(job_priority), (*PRIORITIES, "default"))
        return cls(
            usernames=_values(username),
            virtual_clusters=_values(vc),
            states=_checked("state", _values(state), STATES),
            keyword=(keyword or "").strip(),
            tags_contain=_values(tags_contain),
            tags_not_contain=_values(tags_not_contain),
            priorities=tuple(
                DEFAULT_PRIORITY if value == "default" else value for value in priorities
            ),
            offset=offset,
            limit=limit,
            order_field=order_field,
            descending=descending,
        )

    def page(self, session: Session) -> list[tuple[JobSummary, list[str]]]:
        """The requested page of jobs, each with its tags."""
        ordering = self._ordering()
        page_ids = (
            select(JobRow.id)
            .where(*self._conditions())
            .order_by(*ordering)
            .offset(self.offset)
            .limit(self.limit)
        )
        statement = select(*_SUMMARY_COLUMNS).where(JobRow.id.in_(page_ids)).order_by(*ordering)
        jobs = [JobSummary(**row._mapping) for row in session.execute(statement)]
        tags: dict[int, list[str]] = {job.id: [] for job in jobs}
        if jobs:
            found = session.execute(
                select(JobTag.job_id, JobTag.tag)
                .where(JobTag.job_id.in_(tags))
                .order_by(JobTag.job_id, JobTag.tag)
            )
            for job_id, tag in found:
                tags[job_id].append(tag)
        return [(job, tags[job.id]) for job in jobs]

    def count(self, session: Session) -> int:
        """How many jobs match the filters, regardless of paging: from the counts per user,
        VC and state when the filters are among those, else by counting the jobs."""
        if self.keyword or self.tags_contain or self.tags_not_contain or self.priorities:
            statement = select(func.count()).select_from(JobRow).where(*self._conditions())
            return session.scalar(statement) or 0
        counted = select(func.coalesce(func.sum(JobCount.count), 0))
        for column, values in (
            (JobCount.username, self.usernames),
            (JobCount.virtual_cluster, self.virtual_clusters),
            (JobCount.state, self.states),
        ):
            if values:
                counted = counted.where(column.in_(values))
        return int(session.scalar(counted) or 0)

    def _ordering(self) -> tuple[ColumnElement[Any], ...]:
        """The requested order, then the newest (or oldest) first among equals. Jobs without
        a completion time come last either way, on both backends."""
        column = ORDER_FIELDS[self.order_field]
        ordering = column.desc() if self.descending else column.asc()
        if column is JobRow.completed_at:
            ordering = ordering.nulls_last()
        return ordering, JobRow.id.desc() if self.descending else JobRow.id.asc()

    def _conditions(self) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        for column, values in (
            (JobRow.username, self.usernames),
            (JobRow.virtual_cluster, self.virtual_clusters),
            (JobRow.state, self.states),
            (JobRow.priority_class, self.priorities),
        ):
            if values:
                conditions.append(column.in_(values))
        if self.keyword:
            pattern = f"%{_escape_like(self.keyword)}%"
            conditions.append(
                or_(
                    *(
                        column.like(pattern, escape="\\")
                        for column in (JobRow.username, JobRow.name, JobRow.virtual_cluster)
                    )
                )
            )
        if self.tags_contain:
            conditions.append(_has_tag(self.tags_contain))
        if self.tags_not_contain:
            conditions.append(~_has_tag(self.tags_not_contain))
        return conditions


def _has_tag(tags: Sequence[str]) -> ColumnElement[bool]:
    return exists().where(JobTag.job_id == JobRow.id, JobTag.tag.in_(tags))


def _values(raw: str | None) -> tuple[str, ...]:
    """`a,b` -> ("a", "b"), ignoring empty items."""
    return tuple(dict.fromkeys(part.strip() for part in (raw or "").split(",") if part.strip()))


def _checked(name: str, values: tuple[str, ...], allowed: Sequence[str]) -> tuple[str, ...]:
    unknown = [value for value in values if value not in allowed]
    if unknown:
        raise InvalidParametersError(
            f"{name}: unknown value {', '.join(map(repr, unknown))} (one of {', '.join(allowed)})"
        )
    return values


def _list_pattern(allowed: Sequence[str]) -> str:
    """The regular expression of a comma-separated list of `allowed` values as `parse` reads
    it (space around an item and empty items are ignored), for the API's documentation."""
    item = f" *({'|'.join(allowed)})? *"
    return f"^{item}(,{item})*$"


def _any_case(word: str) -> str:
    return "".join(f"[{letter.upper()}{letter.lower()}]" for letter in word)


STATE_PATTERN = _list_pattern(STATES)
PRIORITY_PATTERN = _list_pattern((*PRIORITIES, "default"))
ORDER_PATTERN = (
    f"^( *({'|'.join(ORDER_FIELDS)}) *(, *({_any_case('ASC')}|{_any_case('DESC')})? *)?)?$"
)
"""`field,ASC|DESC` as `parse` reads it (the direction in any case, space around the parts)."""


def _order(raw: str | None) -> tuple[str, bool]:
    """`field,ASC|DESC` -> (field, descending); the direction defaults to ASC as in SQL."""
    if not raw:
        return "submissionTime", True
    field, _, direction = (part.strip() for part in raw.partition(","))
    if field not in ORDER_FIELDS:
        raise InvalidParametersError(
            f"order: unknown field {field!r} (one of {', '.join(ORDER_FIELDS)})"
        )
    if direction.upper() not in ("", "ASC", "DESC"):
        raise InvalidParametersError(f"order: the direction is ASC or DESC, got {direction!r}")
    return field, direction.upper() == "DESC"


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
