"""Property-based requests from the OpenAPI document (schemathesis) against the whole platform
(API, controller, local executor): no input, valid or not, makes the server fail, and every
answer keeps the promises of the document (status codes, content types, response schemas,
rejection of invalid input).

The fuzzer acts as the administrator with an application token, so that it reaches every
endpoint while neither a password change nor a logout it generates can revoke its own token.
Random job names only ever meet a 404, so a few jobs are seeded first (finished, failed,
running, waiting) and path parameters are often swapped for theirs: the job, attempt, task
and log endpoints then answer about real jobs too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import BaseSchema
from schemathesis.checks import positive_data_acceptance

from server.harness import RunningServer, bearer_auth
from server.jobapi import FINAL_STATES, first_task, job_yaml, submit, unique, wait_for

REQUEST_TIMEOUT_SECONDS = 15
"""Bounds every request, so that a server that hangs fails the test instead of stalling it."""

LOG_STREAM_PATH = (
    "/api/v2/jobs/{framework_name}/attempts/{job_attempt_id}/taskRoles/{role}/taskIndex/{index}"
    "/attempts/{task_attempt_id}/logs/{stream}"
)
"""With `follow=true` this streams until the task attempt ends, so the fuzzer follows only the
logs of tasks that have ended."""


@dataclass(frozen=True)
class SeededJob:
    """A job the fuzzer may name, as the path parameters that reach it and its first task."""

    path_parameters: Mapping[str, Any]
    ended: bool

    def applied_to(self, generated: dict[str, Any]) -> dict[str, Any]:
        """`generated` naming this job where it can. A generated value of another type than
        this job's is kept: it is what makes a negative case invalid."""
        return {
            name: self.path_parameters[name]
            if name in self.path_parameters and type(value) is type(self.path_parameters[name])
            else value
            for name, value in generated.items()
        }


@pytest.fixture(scope="module")
def fuzzer_token(pai_platform: RunningServer) -> str:
    with pai_platform.client(pai_platform.admin_token()) as client:
        token: str = client.post("/tokens/application").json()["token"]
    return token


@pytest.fixture(scope="module")
def seeded_jobs(pai_platform: RunningServer, fuzzer_token: str) -> list[SeededJob]:
    """Two ended jobs in `default`; in `research`, one running job filling the VC and one
    waiting behind it."""
    jobs = [
        (job_yaml(unique("fuzz-ok"), ["echo fuzzed"]), {"SUCCEEDED"}),
        (job_yaml(unique("fuzz-fail"), ["echo oops >&2", "exit 3"]), {"FAILED"}),
        (job_yaml(unique("fuzz-run"), ["sleep 600"], vc="research", cpu=4), {"RUNNING"}),
        (job_yaml(unique("fuzz-wait"), ["true"], vc="research"), {"WAITING"}),
    ]
    with pai_platform.client(fuzzer_token) as client:
        return [_seeded(wait_for(client, submit(client, text), states)) for text, states in jobs]


def _seeded(detail: dict[str, Any]) -> SeededJob:
    task = first_task(detail)
    return SeededJob(
        path_parameters={
            "framework_name": detail["frameworkName"],
            "job_attempt_id": detail["jobStatus"]["attemptId"],
            "role": "main",
            "index": task["taskIndex"],
            "task_attempt_id": task["attemptId"],
            "vc": detail["jobStatus"]["virtualCluster"],
        },
        ended=detail["jobStatus"]["state"] in FINAL_STATES,
    )


@pytest.fixture
def openapi_schema(pai_platform: RunningServer, seeded_jobs: list[SeededJob]) -> BaseSchema:
    schema = schemathesis.openapi.from_url(f"{pai_platform.api_url}/openapi.json")
    # The document's description says that no text may hold NUL; test_api_errors.py checks it.
    schema.config.generation.update(allow_x00=False)

    @schema.hook
    def flatmap_path_parameters(
        context: schemathesis.HookContext, path_parameters: dict[str, Any] | None
    ) -> st.SearchStrategy[dict[str, Any] | None]:
        """The generated parameters, or those of a seeded job where the operation has them."""
        if not path_parameters or not {"framework_name", "vc"} & set(path_parameters):
            return st.just(path_parameters)
        streams = context.operation is not None and context.operation.path == LOG_STREAM_PATH
        named = [job.applied_to(path_parameters) for job in seeded_jobs if job.ended or not streams]
        return st.sampled_from([path_parameters, *named])

    return schema


schema = schemathesis.pytest.from_fixture("openapi_schema")

SEMANTIC_CHECKS = {
    "POST /api/v2/authn/basic/login",
    "POST /api/v2/tokens",
    "PUT /api/v2/users/me",
    "POST /api/v2/jobs",
    "PUT /api/v2/jobs/{framework_name}/executionType",
    "POST /api/v2/storages",
    "PUT /api/v2/storages/{name}",
    "GET /api/v2/storages/{name}/files",
    "DELETE /api/v2/storages/{name}/files",
    "GET /api/v2/storages/{name}/content",
    "PUT /api/v2/storages/{name}/content",
    "POST /api/v2/storages/{name}/folders",
    "POST /api/v2/storages/{name}/uploads",
    "PUT /api/v2/storages/{name}/uploads/{upload_id}",
    "POST /api/v2/marketplace/items",
    "PUT /api/v2/marketplace/items/{item_id}",
    "POST /api/v2/marketplace/items/{item_id}/submissions",
    "PUT /api/v2/cluster/nodes/{node}/cordon",
    "DELETE /api/v2/cluster/nodes/{node}/cordon",
    "GET /api/v2/cluster/usage",
    "POST /api/v2/users/{username}/sshkeys",
}
"""Operations that check more than the document can say, and answer 400 to a request of the
right shape, as OpenPAI does: a wrong password (NoUserError, IncorrectPasswordError); a job
(any object is a document, but a job needs its protocol's fields, references that resolve and a
VC it fits in: InvalidProtocolError lists the problems); `START` of a job that has ended. So do
the storage and marketplace operations: a storage's `data` must fit its type and point at a
directory or bucket that exists; a path inside a storage may not hold `.` or `..`; an upload
goes at the upload's offset; an item's `protocol` must be a valid job. A node to cordon, and a VC
whose usage is asked for, must be the cluster's. An SSH key must be a public key, under a title
its user has not used yet."""


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_the_promises_of_its_openapi_document(
    case: schemathesis.Case, pai_platform: RunningServer, fuzzer_token: str
) -> None:
    excluded = [positive_data_acceptance] if case.operation.label in SEMANTIC_CHECKS else []
    case.call_and_validate(
        base_url=pai_platform.base_url,
        headers=bearer_auth(fuzzer_token),
        excluded_checks=excluded,
        timeout=REQUEST_TIMEOUT_SECONDS,
    )
