"""The chaos run's jobs are valid jobs of the protocol, each of the shape its kind needs."""

from __future__ import annotations

import random
from pathlib import Path

from pai.chaos.workload import KINDS, PROGRAM, CliUser
from pai.protocol.parser import parse_job


def test_every_kind_of_job_is_a_valid_job_that_runs_the_task_program() -> None:
    rng = random.Random(1)
    for kind in KINDS:
        job = parse_job(kind.job_file(f"{kind.name}-0", Path("/runs"), rng))
        roles = {name: role for name, role in job.task_roles.items()}
        commands = [command for role in roles.values() for command in role.commands]
        assert all(command.startswith(f"python3 {PROGRAM} /runs ") for command in commands)
        assert job.job_retry_count == kind.retries
        if kind.name == "gang":  # two roles that each take a whole host
            assert sorted(roles) == ["client", "server"]
            assert {role.resource_per_instance.gpu for role in roles.values()} == {2}
        else:
            assert list(roles) == ["main"]
    interactive = next(kind for kind in KINDS if kind.ssh)
    text = interactive.job_file("interactive-0", Path("/runs"), rng)
    assert "plugin: ssh" in text and "forever" in text
    assert interactive not in CliUser.kinds
