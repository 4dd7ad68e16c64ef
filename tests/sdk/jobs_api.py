"""What the job tests of the SDK and of the CLI share: the jobs API must be there, and jobs get
unique names so that the tests of a module can share one server."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from server.harness import RunningServer

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
JOBS_PATH = "/api/v2/jobs"
_NAME_LINE = re.compile(r"^name: (\S+)$", re.MULTILINE)


def has_jobs_api(server: RunningServer) -> bool:
    """Whether the server's OpenAPI document has the jobs endpoints."""
    with server.client() as client:
        paths = client.get("/openapi.json").json().get("paths", {})
    return JOBS_PATH in paths


def require_jobs_api(server: RunningServer, requirement: Callable[[bool, str], None]) -> None:
    requirement(
        has_jobs_api(server),
        f"the server has no jobs API yet ({JOBS_PATH} is not in its OpenAPI document)",
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def example(file_name: str) -> tuple[str, str]:
    """An example job renamed to a unique name: (name, YAML text)."""
    text = (EXAMPLES / file_name).read_text(encoding="utf-8")
    match = _NAME_LINE.search(text)
    assert match is not None, f"{file_name} has no top-level name"
    name = unique(match.group(1))
    return name, text[: match.start(1)] + name + text[match.end(1) :]


def command_job(name: str, *commands: str, vc: str = "default") -> str:
    """A one-task job running `commands` in virtual cluster `vc`."""
    lines = "\n".join(f"      - {json.dumps(command)}" for command in commands)
    return f"""\
protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: python, uri: "python:3.11"}}
taskRoles:
  main:
    dockerImage: python
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands:
{lines}
defaults:
  virtualCluster: {vc}
"""
