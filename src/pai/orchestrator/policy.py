"""From a job file to the policies the state machine enforces."""

from __future__ import annotations

from pai.orchestrator.framework import Backoff, JobPolicy, RolePolicy
from pai.protocol import JobSpec


def job_policy(spec: JobSpec, backoff: Backoff | None = None) -> JobPolicy:
    """Retry and completion policies as OpenPAI derives them from the protocol.

    Task retries only apply without gang allocation (OpenPAI gives tasks no retries otherwise);
    the completion thresholds arrive with the protocol's defaults already applied.
    """
    roles = {
        name: RolePolicy(
            instances=role.instances,
            min_failed=role.completion.min_failed_instances,
            min_succeeded=role.completion.min_succeeded_instances,
            task_retry_count=role.task_retry_count,
        )
        for name, role in spec.task_roles.items()
    }
    return JobPolicy(
        roles=roles,
        job_retry_count=spec.job_retry_count,
        gang_allocation=spec.extras.gang_allocation,
        backoff=backoff or Backoff(),
    )
