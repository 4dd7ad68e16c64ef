"""Jinja2 templates of the portal and the few helpers they share (times, durations, URLs).

Times are written in UTC inside `<time datetime=...>`; the portal's script shows them in the
visitor's own time zone, and the page stays correct without it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

import pai
from pai.web.notices import clear_notice, pending_notice

NOTHING = "—"

_environment = Environment(
    loader=PackageLoader("pai.web", "templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def moment(value: int | datetime | None) -> Markup:
    """A point in time (a datetime or milliseconds since the epoch) as a `<time>` element."""
    if value is None:
        return Markup(NOTHING)
    at = value if isinstance(value, datetime) else datetime.fromtimestamp(value / 1000, UTC)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    at = at.astimezone(UTC)
    return Markup('<time datetime="{}">{}</time>').format(
        at.isoformat(timespec="seconds"), at.strftime("%Y-%m-%d %H:%M:%S UTC")
    )


def duration(start_ms: int | None, end_ms: int | None = None) -> str:
    """How long from `start_ms` to `end_ms` (or to now): `3h 02m`, `4m 05s`, `12s`."""
    if start_ms is None:
        return NOTHING
    end = end_ms if end_ms is not None else time.time() * 1000
    seconds = max(0, round((end - start_ms) / 1000))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


def state_badge(state: str) -> Markup:
    """A job or task state as a coloured badge."""
    return Markup('<span class="badge state-{}">{}</span>').format(state.lower(), state)


def static_url(path: str) -> str:
    """A file of the portal's static folder; the version in the query busts old caches."""
    return f"/static/{path}?v={pai.__version__}"


_environment.globals.update(
    moment=moment, duration=duration, state_badge=state_badge, static=static_url, NOTHING=NOTHING
)


def render(
    request: Request,
    template: str,
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    **values: Any,
) -> HTMLResponse:
    """A whole page: the template with the navigation of the visitor and a pending notice
    (shown once, then cleared)."""
    notice = pending_notice(request)
    response = HTMLResponse(
        _render(request, template, notice=notice, **values),
        status_code=status_code,
        headers=dict(headers or {}),
    )
    if notice is not None:
        clear_notice(response)
    return response


def render_fragment(request: Request, template: str, **values: Any) -> HTMLResponse:
    """Part of a page, which the portal's script swaps in when it refreshes the page."""
    return HTMLResponse(_render(request, template, **values))


def _render(request: Request, template: str, **values: Any) -> str:
    visitor = getattr(request.state, "visitor", None)
    return _environment.get_template(template).render(
        request=request,
        visitor=visitor,
        url=request.app.url_path_for,
        **values,
    )
