"""The FastAPI app: the OpenPAI REST API v2, metrics and the portal."""

from pai.server.app import (
    API_PREFIX,
    InnerMiddleware,
    Lifespan,
    announce_admin_password,
    create_app,
)
from pai.server.context import ServerContext
from pai.server.serve import build_server, settle_heap

__all__ = [
    "API_PREFIX",
    "InnerMiddleware",
    "Lifespan",
    "ServerContext",
    "announce_admin_password",
    "build_server",
    "create_app",
    "settle_heap",
]
