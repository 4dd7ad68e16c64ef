"""Submitting a job: a YAML editor seeded from an example or from a job to clone, fields for
the job's parameters, problems shown at their lines while typing, and the submission itself,
which is the API's (same checks, same rate limit)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Annotated, Any

from anyio import from_thread
from fastapi import Depends, Form, Request, Response
from fastapi.responses import HTMLResponse

from pai.errors import ForbiddenUserError, InvalidProtocolError, PaiError
from pai.marketplace.examples import DEFAULT_EXAMPLE, job_example, job_examples
from pai.orchestrator.intents import find_job
from pai.protocol import Problem, ProtocolError, parse_job
from pai.server.deps import Context
from pai.server.routes import jobs as jobs_api
from pai.server.routes import marketplace as market_api
from pai.web.editing import (
    clone_name,
    declared_parameters,
    job_name,
    masked_secrets,
    renamed,
    with_parameters,
)
from pai.web.notices import redirect
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormVisitor, ScriptVisitor, Visitor
from pai.web.templating import render

router = portal_router()

PARAMETER_FIELD = "parameter."
"""Form fields named `parameter.<name>` override the job's parameter `<name>`."""


def job_problems(text: str | bytes) -> tuple[list[Problem], str | None]:
    """What is wrong with the job text, or a one-line description of the valid job."""
    try:
        spec = parse_job(text)
    except ProtocolError as invalid:
        return list(invalid.problems), None
    decoded = text.decode() if isinstance(text, bytes) else text
    problems = masked_secrets(decoded)
    if problems:
        return problems, None
    tasks = spec.total_tasks
    summary = (
        f"Job '{spec.name}' is valid: {tasks} task{'s' if tasks != 1 else ''} "
        f"in virtual cluster '{spec.virtual_cluster}'."
    )
    return [], summary


async def typed_parameters(request: Request) -> dict[str, str]:
    """The parameter values typed in the form's fields."""
    form = await request.form()
    return {
        key.removeprefix(PARAMETER_FIELD): value
        for key, value in form.multi_items()
        if key.startswith(PARAMETER_FIELD) and isinstance(value, str)
    }


@router.get("/submit", name="portal.submit")
def editor(
    request: Request,
    context: Context,
    visitor: CurrentVisitor,
    example: str | None = None,
    clone: str | None = None,
    market: str | None = None,
) -> HTMLResponse:
    if market is not None:
        item = market_api.get_item(market, context, visitor.principal)
        text = renamed(item.protocol, clone_name(job_name(item.protocol)))
        source = f"the marketplace item {item.name}"
        return _editor_page(
            request,
            context,
            visitor,
            text,
            source=source,
            problems=masked_secrets(text),
            market_item=item.id,
        )
    if clone is not None:
        with context.database.reading() as session:
            row = find_job(session, clone)
            if not visitor.principal.may_act_for(row.username):
                raise ForbiddenUserError(
                    f"only {row.username} (the owner) or an administrator may clone job "
                    f"'{row.framework_name}', since cloning shows its config"
                )
            text, source = renamed(row.job_text, clone_name(row.name)), f"a clone of {clone}"
        problems = masked_secrets(text)
    else:
        chosen = job_example(example or DEFAULT_EXAMPLE)
        text, source, problems = chosen.text, f"the example {chosen.name}", []
    return _editor_page(request, context, visitor, text, source=source, problems=problems)


@router.post("/submit/check", name="portal.check_job")
def check(visitor: ScriptVisitor, text: jobs_api.JobText) -> dict[str, Any]:
    """The problems of the editor's text with their places, and its parameters, while the
    user types (nothing is recorded)."""
    problems, summary = job_problems(text)
    return {
        "problems": [asdict(problem) for problem in problems],
        "summary": summary,
        "parameters": [
            asdict(parameter) for parameter in declared_parameters(text.decode(errors="replace"))
        ],
    }


@router.post("/submit")
def submit(
    request: Request,
    context: Context,
    visitor: FormVisitor,
    parameters: Annotated[dict[str, str], Depends(typed_parameters)],
    job: Annotated[str, Form()] = "",
    market_item: Annotated[str, Form()] = "",
) -> Response:
    problems, _ = job_problems(job)
    if problems:
        return _editor_page(
            request,
            context,
            visitor,
            job,
            typed=parameters,
            problems=problems,
            status=400,
            market_item=market_item,
        )
    try:
        submitted = from_thread.run(
            jobs_api.accept_job,
            visitor.principal,
            with_parameters(job, parameters).encode(),
            context,
        )
    except InvalidProtocolError as invalid:
        return _editor_page(
            request,
            context,
            visitor,
            job,
            typed=parameters,
            problems=invalid.problems,
            message=invalid.message,
            status=invalid.status,
            market_item=market_item,
        )
    except PaiError as refused:
        return _editor_page(
            request,
            context,
            visitor,
            job,
            typed=parameters,
            message=refused.message,
            status=refused.status,
            market_item=market_item,
        )
    if market_item:
        market_api.record_run(context, visitor.principal, market_item, submitted.name)
    url = str(request.app.url_path_for("portal.job", framework_name=submitted.name))
    return redirect(url, f"Job {submitted.name} is submitted.")


def _editor_page(
    request: Request,
    context: Context,
    visitor: Visitor,
    text: str,
    *,
    source: str | None = None,
    typed: dict[str, str] | None = None,
    problems: Sequence[Problem | Mapping[str, object]] = (),
    message: str | None = None,
    status: int = 200,
    market_item: str = "",
) -> HTMLResponse:
    """The editor; `problems` are the protocol's or the API's (`{path, message, line, column}`).
    `market_item` is the marketplace item the job comes from (its run is counted)."""
    vcs = sorted(context.control_plane.cluster.virtual_clusters)
    return render(
        request,
        "submit.html",
        status_code=status,
        nav="submit",
        text=text,
        source=source,
        examples=job_examples().values(),
        parameters=declared_parameters(text),
        typed=typed or {},
        problems=[asdict(p) if isinstance(p, Problem) else p for p in problems],
        message=message,
        usable_vcs=[vc for vc in vcs if visitor.principal.may_use_virtual_cluster(vc)],
        market_item=market_item,
    )
