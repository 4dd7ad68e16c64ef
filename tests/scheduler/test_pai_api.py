"""A starving job's estimated start, as the API shows it, on a whole platform running `pai`.

The local 4-node cluster (default VC: 3 nodes, research: 1 node, 4 CPU slots each) is filled so
that a research job can neither run in its VC nor overflow anywhere; with a starvation bound of
zero it gets a reservation at once, and research has already learned how long its jobs run.
"""

from __future__ import annotations

import time
from pathlib import Path

from server.harness import StartServer, server_settings
from server.jobapi import detail, job_yaml, submit, unique, wait_for


def test_the_wait_reason_tells_when_a_starving_job_is_expected_to_start(
    start_pai_platform: StartServer, pai_database_url: str, tmp_path: Path
) -> None:
    settings = server_settings(
        tmp_path / "pai", pai_database_url, scheduler="pai", scheduler_reserve_after=0
    )
    server = start_pai_platform(settings)
    with server.client(server.admin_token()) as client:
        short = submit(client, job_yaml(unique("short"), ["sleep 1"], vc="research", cpu=4))
        assert wait_for(client, short)["jobStatus"]["state"] == "SUCCEEDED"
        running = submit(client, job_yaml(unique("long"), ["sleep 300"], vc="research", cpu=4))
        wait_for(client, running, {"RUNNING"})
        filler = submit(client, job_yaml(unique("fill"), ["sleep 300"], cpu=4, instances=3))
        wait_for(client, filler, {"RUNNING"})

        waiter = submit(client, job_yaml(unique("waiter"), ["true"], vc="research", cpu=4))
        deadline = time.monotonic() + 30
        reason = None
        while time.monotonic() < deadline:
            job = detail(client, waiter)
            reason = job["jobStatus"]["waitReason"]
            if reason is not None and "estimated start" in reason["message"]:
                break
            time.sleep(0.1)
        assert job["jobStatus"]["state"] == "WAITING"
        assert reason is not None, "no wait reason"
        # `short` ran about a second: `long` is overdue, so the start is imminent
        assert (
            "estimated start: in less than a minute, after job " + running + " ends"
            in (reason["message"])
        ), reason
        assert reason["details"]["estimated_start_after"] == f"{running}/default"
        assert abs(reason["details"]["estimated_start"] - time.time()) < 30

        stopped = client.put(f"/jobs/{running}/executionType", json={"value": "STOP"})
        assert stopped.status_code == 202
        assert wait_for(client, waiter)["jobStatus"]["state"] == "SUCCEEDED"
