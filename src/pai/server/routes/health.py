"""Probes for process supervisors and Kubernetes: alive, and ready to serve."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.exc import SQLAlchemyError

from pai.errors import ServiceUnavailableError
from pai.server.deps import Context
from pai.server.errors import error_responses
from pai.server.schemas import Message
from pai.store import head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Message)
def healthz() -> Message:
    """The process is alive (no dependency is checked)."""
    return Message(message="ok")


@router.get("/readyz", response_model=Message, responses=error_responses(503))
def readyz(context: Context) -> Message:
    """The database is reachable and its schema is at this version's newest migration."""
    try:
        revision = context.database.current_revision()
    except SQLAlchemyError as exc:
        raise ServiceUnavailableError(
            f"the database is not reachable ({type(exc).__name__})"
        ) from None
    expected = head_revision()
    if revision != expected:
        raise ServiceUnavailableError(
            f"the database schema is at {revision or 'no revision'}, expected {expected}"
        )
    return Message(message="ready")
