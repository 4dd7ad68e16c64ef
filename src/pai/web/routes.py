"""The portal as one router, mounted at the root of the platform's app (the API being under
`/api/v2`): its pages, and its stylesheet and scripts under `/static`."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.staticfiles import StaticFiles

from pai.web.pages import (
    account,
    admin,
    alerts,
    clusters,
    home,
    job,
    jobs,
    login,
    marketplace,
    storage,
    submit,
)

STATIC_FOLDER = Path(str(files("pai.web") / "static"))

router = APIRouter(include_in_schema=False)
# The job list's own paths (/jobs/table) come before the job pages' /jobs/{name}.
for pages in (
    login,
    home,
    jobs,
    job,
    submit,
    clusters,
    alerts,
    admin,
    account,
    storage,
    marketplace,
):
    router.include_router(pages.router)
router.mount("/static", StaticFiles(directory=STATIC_FOLDER), name="static")
