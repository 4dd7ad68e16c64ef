"""The job list: filters, sorting and paging over the API's job query, and the table alone,
which the page's script fetches again every few seconds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Query, Request
from fastapi.responses import HTMLResponse

from pai.server.deps import Context
from pai.server.joblist import STATES, JobListQuery
from pai.server.jobschemas import JobListItem
from pai.server.jobviews import list_item
from pai.web.capacity import has_gpus
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor
from pai.web.templating import render, render_fragment

router = portal_router()

PAGE_SIZES = (20, 50, 100)
DEFAULT_ORDER = "submissionTime,DESC"
ACTIVE = "WAITING,RUNNING,STOPPING"
STATE_CHOICES = (
    ("", "Any state"),
    (ACTIVE, "Active"),
    *((state, state.title()) for state in STATES),
)


@dataclass(frozen=True)
class Column:
    title: str
    field: str | None
    """The API's `order` field it sorts by, if it sorts."""
    descending_first: bool = False


COLUMNS = (
    Column("Job", "jobName"),
    Column("User", "username"),
    Column("VC", "vc"),
    Column("State", "state"),
    Column("Submitted", "submissionTime", descending_first=True),
    Column("Duration", None),
    Column("Retries", "retries", descending_first=True),
    Column("Tasks", "totalTaskNumber", descending_first=True),
    Column("GPUs", "totalGpuNumber", descending_first=True),
)


@dataclass(frozen=True)
class JobFilters:
    """The list's query string: what to show, in which order, which page."""

    state: str = ""
    user: str = ""
    vc: str = ""
    keyword: str = ""
    order: str = DEFAULT_ORDER
    offset: Annotated[int, Query(ge=0)] = 0
    limit: Annotated[int, Query(ge=1, le=max(PAGE_SIZES))] = PAGE_SIZES[0]

    def query(self) -> JobListQuery:
        return JobListQuery.parse(
            username=self.user,
            vc=self.vc,
            state=self.state,
            keyword=self.keyword,
            offset=self.offset,
            limit=self.limit,
            order=self.order,
        )

    def url(self, path: str = "/jobs", **changes: Any) -> str:
        """This list's URL with `changes`, writing only what differs from the defaults."""
        values = asdict(replace(self, **changes))
        defaults = asdict(JobFilters())
        shown = {name: value for name, value in values.items() if value != defaults[name]}
        return f"{path}?{urlencode(shown)}" if shown else path

    def sorted_by(self, column: Column) -> str | None:
        """`ascending`/`descending` if the list is sorted by `column`."""
        field, _, direction = self.order.partition(",")
        if column.field != field:
            return None
        return "descending" if direction.upper() == "DESC" else "ascending"

    def sort_url(self, column: Column) -> str:
        current = self.sorted_by(column)
        descending = column.descending_first if current is None else current == "ascending"
        return self.url(order=f"{column.field},{'DESC' if descending else 'ASC'}", offset=0)


Filters = Annotated[JobFilters, Depends()]


@dataclass(frozen=True)
class JobPage:
    items: list[JobListItem]
    total: int
    filters: JobFilters

    @property
    def previous_url(self) -> str | None:
        filters = self.filters
        if filters.offset == 0:
            return None
        return filters.url(offset=max(0, filters.offset - filters.limit))

    @property
    def next_url(self) -> str | None:
        filters = self.filters
        if filters.offset + filters.limit >= self.total:
            return None
        return filters.url(offset=filters.offset + filters.limit)


def job_page(context: Context, filters: JobFilters) -> JobPage:
    query = filters.query()
    with context.database.reading() as session:
        items = [list_item(job, tags) for job, tags in query.page(session)]
        return JobPage(items, query.count(session), filters)


@router.get("/jobs", name="portal.jobs")
def jobs(
    request: Request, context: Context, visitor: CurrentVisitor, filters: Filters
) -> HTMLResponse:
    return render(
        request,
        "jobs.html",
        nav="jobs",
        page=job_page(context, filters),
        columns=_columns(context),
        vcs=sorted(context.control_plane.cluster.virtual_clusters),
        state_choices=STATE_CHOICES,
        page_sizes=PAGE_SIZES,
    )


@router.get("/jobs/table", name="portal.jobs_table")
def jobs_table(
    request: Request, context: Context, visitor: CurrentVisitor, filters: Filters
) -> HTMLResponse:
    return render_fragment(
        request, "jobs_table.html", page=job_page(context, filters), columns=_columns(context)
    )


def _columns(context: Context) -> tuple[Column, ...]:
    """Every column, but GPUs only on a cluster that has GPUs."""
    if has_gpus(context):
        return COLUMNS
    return tuple(column for column in COLUMNS if column.field != "totalGpuNumber")
