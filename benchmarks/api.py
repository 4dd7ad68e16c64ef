"""REST API speed with a large store: listing jobs, and accepting submissions.

The store is seeded with SQL (default 100,000 finished jobs of 500 users in both VCs, with
state machines, job texts and tags shaped like those of real jobs), then the whole platform
serves it, as `pai up` does, in a process of its own on the four-node example cluster, so that
the clients measured here do not share a Python interpreter with the server.

- Listing: pages of 50 jobs, filtered the ways the portal and CLI do (user, VC, state, tags,
  ordering), one request at a time; client-side latency percentiles.
- Submitting: 16 clients (threads), one user each, submit small jobs as fast as they can; the
  rate counts 202 answers. The jobs queue in the `research` VC behind a job that holds it, so
  that no task process competes with the server for the CPU.

    python benchmarks/api.py            # Rich table
    python benchmarks/api.py --json     # {"jobs_in_store", "list_p50_ms", ...}
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert

from pai.cluster import cluster_from_file
from pai.executors.local import kill_processes_under
from pai.orchestrator import framework as fw
from pai.orchestrator.policy import job_policy
from pai.platform import create_platform_app
from pai.protocol import parse_job, rendered_job_dict
from pai.server import build_server
from pai.server.logconfig import configure_logging
from pai.settings import Settings, default_database_url
from pai.store import Database
from pai.store.models import JobRow, JobTag

CLUSTER = Path(__file__).parents[1] / "examples" / "clusters" / "local-4node.yaml"
USERS = 500
TAGS = ("baseline", "sweep", "debug", "nightly", "ablation")
OUTCOMES = (("SUCCEEDED", 0, 0.65), ("FAILED", 255, 0.2), ("STOPPED", -210, 0.15))
BATCH = 5000
ADMIN_PASSWORD = secrets.token_urlsafe(12)

JOB_TEXT = """protocolVersion: 2
name: {name}
type: job
jobRetryCount: 1
prerequisites:
  - {{type: dockerimage, name: image, uri: "python:3.11"}}
taskRoles:
  train:
    instances: {instances}
    dockerImage: image
    resourcePerInstance: {{cpu: {cpu}, memoryMB: 512, gpu: 0}}
    commands:
      - "{command}"
defaults:
  virtualCluster: {vc}
"""


# -- seeding --------------------------------------------------------------------------------------


def finished_status(spec_text: str, code: int) -> dict[str, Any]:
    """The state machine of a job that ran its tasks once and ended with `code`, built by the
    same transitions the controller applies."""
    spec = parse_job(spec_text)
    machine, _ = fw.new_job(job_policy(spec, fw.Backoff()), 1000.0)
    placements = {
        key: {
            "key": f"k-{key[0]}-{key[1]}",
            "node": "node1",
            "address": "127.0.0.1",
            "gpus": [],
            "leaves": [key[1]],
            "ports": {"ssh": [15000 + 2 * key[1]], "http": [15001 + 2 * key[1]]},
        }
        for key in machine.tasks
    }
    fw.on_placed(machine, placements, 1001.0)
    for key, where in placements.items():
        machine.tasks[key].current.placement = where
        fw.on_task_running(machine, key, 0, 1002.0)
    if code == fw.STOP_REQUESTED_CODE:
        fw.on_stop_requested(machine, 1100.0)
        for key in machine.tasks:
            fw.on_task_exited(machine, key, 0, fw.STOP_REQUESTED, 1101.0)
    else:
        status = fw.SUCCEEDED if code == 0 else fw.CompletionStatus(code, "PAIRuntimeUnknownFailed")
        for key in machine.tasks:
            fw.on_task_exited(machine, key, 0, status, 1100.0)
    return machine.to_dict()


def seed(database: Database, jobs: int, rng: random.Random) -> None:
    """Insert `jobs` finished jobs (and tags for one job in ten) with plain SQL inserts."""
    templates = {}
    for (state, code, _), instances in itertools.product(OUTCOMES, (1, 2)):
        text = JOB_TEXT.format(
            name="template", instances=instances, cpu=1, command="python train.py", vc="default"
        )
        templates[(state, instances)] = (
            text,
            rendered_job_dict(parse_job(text)),
            finished_status(text, code),
            code,
        )
    states = [state for state, _, _ in OUTCOMES]
    weights = [weight for _, _, weight in OUTCOMES]
    start = datetime.now(UTC) - timedelta(days=90)
    step = timedelta(days=90) / jobs
    with database.engine.begin() as connection:
        for first in range(0, jobs, BATCH):
            rows, tags = [], []
            for number in range(first, min(jobs, first + BATCH)):
                state = rng.choices(states, weights)[0]
                instances = rng.choice((1, 1, 1, 2))
                text, spec, status, code = templates[(state, instances)]
                submitted = start + number * step
                launched = submitted + timedelta(seconds=rng.randint(1, 600))
                rows.append(
                    {
                        "id": number + 1,
                        "username": f"user{rng.randrange(USERS)}",
                        "name": f"job-{number}",
                        "virtual_cluster": "default" if rng.random() < 0.75 else "research",
                        "priority_class": rng.choice(("test", "test", "prod", "oppo")),
                        "submitted_at": submitted,
                        "job_text": text,
                        "spec": spec,
                        "sealed_secrets": None,
                        "stop_requested_at": launched if state == "STOPPED" else None,
                        "total_tasks": instances,
                        "total_gpus": 0,
                        "total_roles": 1,
                        "state": state,
                        "sub_state": "Completed",
                        "execution_type": "STOP" if state == "STOPPED" else "START",
                        "launched_at": launched,
                        "completed_at": launched + timedelta(seconds=rng.randint(1, 36000)),
                        "retries": 0,
                        "exit_code": code,
                        "status": status,
                        "allocations": [],
                        "wait_reason": None,
                    }
                )
                if rng.random() < 0.1:
                    tags.append({"job_id": number + 1, "tag": rng.choice(TAGS)})
            connection.execute(insert(JobRow), rows)
            if tags:
                connection.execute(insert(JobTag), tags)
        if database.backend == "postgresql":  # the ids were given: move the sequence past them
            connection.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('jobs', 'id'), {int(jobs)})"
            )


# -- the server -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve(port: int) -> None:
    """Run the platform with the `PAI_*` settings of the environment, logging to
    `$PAI_HOME/pai.log`, as `pai up` does."""
    settings = Settings.from_env()
    with (settings.home / "pai.log").open("a", encoding="utf-8") as log:
        configure_logging(settings.log_level, log)
        app = create_platform_app(settings, cluster_from_file(CLUSTER))
        build_server(app, port=port).run()


@contextmanager
def platform(home: Path, database_url: str) -> Iterator[str]:
    """The platform on the example cluster in a process of its own; yields the API's URL."""
    port = free_port()
    environment = {
        **os.environ,
        "PAI_HOME": str(home),
        "PAI_DATABASE_URL": database_url,
        "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PAI_SUBMISSION_RATE_LIMIT": str(10**9),
        "PAI_LOGIN_RATE_LIMIT": str(10**6),
    }
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=(home / "server.log").open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the platform did not start; see {home / 'server.log'}")
            time.sleep(0.2)
        yield f"{base}/api/v2"
    finally:
        server.terminate()
        server.wait(60)
        # Stopping the held job lets queued benchmark jobs start as the server goes down.
        kill_processes_under(home)


def log_in(api: str, username: str, password: str) -> httpx.Client:
    token = httpx.post(
        f"{api}/authn/basic/login", json={"username": username, "password": password}
    ).json()["token"]
    return httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=60)


# -- measurements ---------------------------------------------------------------------------------


def list_queries(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Pages of 50 as users ask for them: their own jobs, a VC's jobs in some states, a tag."""
    queries = []
    for _ in range(count):
        user = f"user{rng.randrange(USERS)}"
        shape = rng.randrange(5)
        if shape == 0:
            query = {"username": user, "vc": "default", "state": "SUCCEEDED,FAILED"}
        elif shape == 1:
            query = {"username": user, "order": "completionTime,DESC"}
        elif shape == 2:
            query = {"vc": "research", "state": "FAILED", "order": "submissionTime,DESC"}
        elif shape == 3:
            query = {"tagsContain": rng.choice(TAGS), "username": user}
        else:
            query = {"state": "RUNNING,WAITING,STOPPED", "withTotalCount": "true"}
        queries.append({**query, "limit": 50})
    return queries


def measure_listing(client: httpx.Client, queries: list[dict[str, Any]]) -> list[float]:
    for query in queries[:20]:  # warm the caches
        client.get("/jobs", params=query).raise_for_status()
    latencies = []
    for query in queries:
        started = time.perf_counter()
        response = client.get("/jobs", params=query)
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return latencies


def measure_submissions(clients: list[httpx.Client], per_client: int) -> float:
    """Accepted submissions per second, all clients submitting at once."""
    accepted = [0] * len(clients)
    refusals: list[str] = []
    barrier = threading.Barrier(len(clients) + 1)

    def submit_all(index: int, client: httpx.Client) -> None:
        barrier.wait()
        for number in range(per_client):
            text = JOB_TEXT.format(
                name=f"bench-{index}-{number}", instances=1, cpu=4, command="true", vc="research"
            )
            response = client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})
            if response.status_code == 202:
                accepted[index] += 1
            else:
                refusals.append(response.text)

    threads = [
        threading.Thread(target=submit_all, args=(index, client))
        for index, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if refusals:
        raise RuntimeError(f"{len(refusals)} submissions were refused, e.g.: {refusals[0]}")
    return sum(accepted) / elapsed


def percentile(values: list[float], fraction: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def run(
    jobs: int, clients: int, per_client: int, list_requests: int, url: str | None
) -> dict[str, Any]:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as directory:
        home = Path(directory)
        database_url = url or default_database_url(home)
        database = Database(database_url)
        with database.exclusive() as connection:
            database.upgrade(connection)
        seed(database, jobs, rng)
        backend = database.backend
        database.dispose()
        with platform(home, database_url) as api, log_in(api, "admin", ADMIN_PASSWORD) as admin:
            latencies = measure_listing(admin, list_queries(rng, list_requests))
            blocker = hold_research(admin)
            submitters = [log_in(api, *account) for account in research_users(admin, clients)]
            try:
                rate = measure_submissions(submitters, per_client)
            finally:
                for client in submitters:
                    client.close()
                stop(admin, blocker)
    return {
        "jobs_in_store": jobs,
        "list_p50_ms": round(percentile(latencies, 0.5), 2),
        "list_p99_ms": round(percentile(latencies, 0.99), 2),
        "submissions_per_second": round(rate, 1),
        "submissions": clients * per_client,
        "clients": clients,
        "backend": backend,
    }


def hold_research(admin: httpx.Client) -> str:
    """A job holding the whole `research` VC, so that the benchmark's jobs queue behind it."""
    text = JOB_TEXT.format(
        name="holds-research", instances=1, cpu=4, command="sleep 3600", vc="research"
    )
    response = admin.post("/jobs", content=text)
    response.raise_for_status()
    name: str = response.json()["name"]
    return name


def research_users(admin: httpx.Client, count: int) -> list[tuple[str, str]]:
    """`count` new users of the `research` VC, as (name, password)."""
    acls = {"virtualClusters": ["research"]}
    admin.post("/groups", json={"groupname": "bench", "extension": {"acls": acls}})
    accounts = [(f"bench{index}", secrets.token_urlsafe(12)) for index in range(count)]
    for username, password in accounts:
        body = {"username": username, "password": password, "virtualCluster": ["research"]}
        admin.post("/users", json=body).raise_for_status()
    return accounts


def stop(admin: httpx.Client, job: str, timeout: float = 60.0) -> None:
    """Stop a job and wait until its task is gone (the platform is shut down next)."""
    admin.put(f"/jobs/{job}/executionType", json={"value": "STOP"}).raise_for_status()
    deadline = time.monotonic() + timeout
    while admin.get(f"/jobs/{job}").json()["jobStatus"]["state"] != "STOPPED":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{job} did not stop within {timeout:g} s")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs seeded in the store")
    parser.add_argument("--clients", type=int, default=16, help="concurrent submitting clients")
    parser.add_argument("--submissions", type=int, default=50, help="submissions per client")
    parser.add_argument("--list-requests", type=int, default=500, help="list requests timed")
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database to use instead of SQLite"
    )
    parser.add_argument("--serve", type=int, metavar="PORT", help="run the server (internal)")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    result = run(args.jobs, args.clients, args.submissions, args.list_requests, args.database_url)
    if args.json:
        keys = ("jobs_in_store", "list_p50_ms", "list_p99_ms", "submissions_per_second")
        print(json.dumps({key: result[key] for key in keys}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"PAI REST API on {result['backend']}")
    for title in ("jobs in store", "list p50 ms", "list p99 ms", "submissions/s", "clients"):
        table.add_column(title, justify="right")
    table.add_row(
        f"{result['jobs_in_store']:,}",
        str(result["list_p50_ms"]),
        str(result["list_p99_ms"]),
        str(result["submissions_per_second"]),
        str(result["clients"]),
    )
    Console().print(table)


if __name__ == "__main__":
    main()
