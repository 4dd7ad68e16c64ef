"""Helpers for tests that drive jobs through the REST API of a running platform."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx

FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


def unique(prefix: str) -> str:
    """A job name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def job_yaml(
    name: str,
    commands: list[str],
    *,
    vc: str = "default",
    cpu: int = 1,
    instances: int = 1,
    top: str = "",
    role: str = "",
    extras: str = "",
) -> str:
    """A one-role job (`main`) running `commands`; `top`, `role` and `extras` add YAML lines to
    the top level, to the role and under `extras:`."""
    lines = "\n".join(f"      - {json.dumps(command)}" for command in commands)
    extras_block = f"extras:\n{extras}\n" if extras else ""
    return f"""protocolVersion: 2
name: {name}
type: job
{top}
prerequisites:
  - {{type: dockerimage, name: image, uri: "python:3.11"}}
taskRoles:
  main:
    instances: {instances}
    {role}
    dockerImage: image
    resourcePerInstance: {{cpu: {cpu}, memoryMB: 256, gpu: 0}}
    commands:
{lines}
defaults:
  virtualCluster: {vc}
{extras_block}"""


def submit(client: httpx.Client, text: str) -> str:
    """Submit a job and return its full name (fails the test unless it is accepted)."""
    response = client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})
    assert response.status_code == 202, response.text
    name: str = response.json()["name"]
    return name


def detail(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/jobs/{name}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def wait_for(
    client: httpx.Client,
    name: str,
    states: frozenset[str] | set[str] = FINAL_STATES,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Poll the job's detail until its state is one of `states`."""
    deadline = time.monotonic() + timeout
    while True:
        job = detail(client, name)
        if job["jobStatus"]["state"] in states:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} is still {job['jobStatus']['state']} after {timeout} s")
        time.sleep(0.1)


def first_task(job: dict[str, Any], role: str = "main") -> dict[str, Any]:
    task: dict[str, Any] = job["taskRoles"][role]["taskStatuses"][0]
    return task
