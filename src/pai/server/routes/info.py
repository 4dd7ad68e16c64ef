"""`GET /api/v2/info`: what this server is."""

from __future__ import annotations

from fastapi import APIRouter

import pai
from pai.server.deps import Context
from pai.server.schemas import ServerInfo

router = APIRouter(tags=["info"])


@router.get("/info", response_model=ServerInfo)
def server_info(context: Context) -> ServerInfo:
    return ServerInfo(
        name="PAI RESTful API",
        version=pai.__version__,
        launcherType="k8s",
        authnMethod="OIDC" if context.settings.authn.mode == "oidc" else "basic",
        executor=context.launcher_type,
    )
