"""One-time notices ("job submitted", "user deleted") carried across a redirect.

After a form is handled the browser is redirected (so reloading does not send it again); the
notice rides along in a short-lived cookie that the next page shows once and clears.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError

from pai.errors import PaiError
from pai.server.errors import describe_validation_errors

NOTICE_COOKIE = "pai_notice"
NOTICE_SECONDS = 60
MAX_NOTICE_LENGTH = 1000

Kind = Literal["success", "error"]


@dataclass(frozen=True)
class Notice:
    kind: Kind
    text: str


def redirect(url: str, text: str | None = None, kind: Kind = "success") -> RedirectResponse:
    """See other page (303), with a notice to show there."""
    response = RedirectResponse(url, status_code=303)
    if text is not None:
        value = json.dumps({"kind": kind, "text": text[:MAX_NOTICE_LENGTH]})
        response.set_cookie(
            NOTICE_COOKIE, quote(value), max_age=NOTICE_SECONDS, httponly=True, samesite="lax"
        )
    return response


def pending_notice(request: Request) -> Notice | None:
    raw = request.cookies.get(NOTICE_COOKIE)
    if not raw:
        return None
    try:
        value = json.loads(unquote(raw))
        kind, text = value["kind"], value["text"]
    except (ValueError, KeyError, TypeError):
        return None
    if kind not in ("success", "error") or not isinstance(text, str):
        return None
    return Notice(kind, text)


def clear_notice(response: Response) -> None:
    response.delete_cookie(NOTICE_COOKIE)


def redirect_after(back: str, action: Callable[[], str]) -> RedirectResponse:
    """Do what a form asks and go `back` with what happened: the action's message, or the
    error it was refused with (so a refused form explains itself where it was sent from)."""
    try:
        message = action()
    except ValidationError as invalid:
        return redirect(back, describe_validation_errors(invalid.errors()), "error")
    except PaiError as refused:
        return redirect(back, refused.message, "error")
    return redirect(back, message)
