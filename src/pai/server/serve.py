"""Running the app under uvicorn, configured the same way by `pai up` and the test harness."""

from __future__ import annotations

import gc
from typing import Any

import uvicorn
from fastapi import FastAPI

GRACEFUL_SHUTDOWN_SECONDS = 5
"""How long a stopping server lets open requests finish: a followed log or an event stream
never ends by itself, and without a bound it would keep `pai up` from stopping."""


def server_options() -> dict[str, Any]:
    """uvicorn's options for PAI: logging is left alone (the app logs each request itself,
    redacted, so uvicorn's access log, which would print token-bearing paths, stays off)."""
    return {
        "lifespan": "on",
        "log_config": None,
        "access_log": False,
        "server_header": False,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS,
    }


def build_server(app: FastAPI, *, host: str = "127.0.0.1", port: int = 8080) -> uvicorn.Server:
    """A uvicorn server for `app` on `host:port`."""
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, **server_options()))


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations (net of frees) between two collections of the youngest generation. A request
allocates a few thousand objects, nearly all freed by reference counting as it ends; at
Python's default of 700, the collector ran several times per request, and what it found alive
in flight was promoted to be walked again by the full collections: in an API worker taking
submissions, 6 % of its CPU, against 1 % at this threshold."""


def settle_heap() -> None:
    """For a process that serves until it exits, once its app is built: what exists then (code,
    routes, schemas) lives as long as the process, so the garbage collector stops walking it
    again on every collection of the requests' garbage, and collects that garbage less often.
    Not for servers started inside a longer-lived process (tests), whose apps come and go."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)
