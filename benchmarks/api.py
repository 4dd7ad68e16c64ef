"""REST API speed with a large store, and how submissions scale with API workers.

The control plane runs as an operator scales it out: `pai serve controller` and `pai serve api
--workers N` in processes of their own on the four-node example cluster, so that the clients
measured here do not share a Python interpreter with the server.

- Listing: the store is seeded with SQL (default 1,000,000 finished jobs of 500 users in both
  VCs, with state machines, job texts and tags shaped like those of real jobs); pages of 50 jobs,
  filtered the ways the portal and CLI do (user, VC, state, tags, ordering, total counts), one
  request at a time; client-side latency percentiles, on SQLite and on PostgreSQL.
- Submitting: 64 clients (connections), one user each, submit small jobs as fast as they can, with
  1 and with 4 API workers, on SQLite and on PostgreSQL (a fresh store for each run); the rate
  counts 202 answers. The jobs queue in the `research` VC behind jobs that hold every cell of
  the cluster, so that no task process competes with the server for the CPU. A run is a warm-up
  round and then `--rounds` rounds of `--submissions` per client, one after another; it reports
  the median round and the slowest and fastest (on a shared machine one round's rate can be a
  fifth off the next one's), and the CPU time each part spent per submission in those rounds:
  the API workers, the controller, PostgreSQL and the clients, who all share this machine.

    python benchmarks/api.py            # Rich tables
    python benchmarks/api.py --json     # {"jobs_in_store", "list_p50_ms", ..., "runs": [...]}
"""

from __future__ import annotations

import argparse
import asyncio
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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psutil
import sqlalchemy
from sqlalchemy import insert
from sqlalchemy.engine import make_url

from pai.executors.local import kill_processes_under
from pai.orchestrator import framework as fw
from pai.orchestrator.policy import job_policy
from pai.protocol import parse_job, rendered_job_dict
from pai.settings import default_database_url
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
    if database.backend == "postgresql":
        # What autovacuum does within a minute of a bulk load: the planner's statistics of a
        # store that grew to this size over months.
        with database.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


# -- the server -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def platform(
    home: Path,
    database_url: str,
    api_workers: int,
    controller_options: Sequence[str] = ("--cluster", str(CLUSTER)),
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, dict[str, subprocess.Popen[bytes]]]]:
    """A controller (with `controller_options`) and `api_workers` API workers, each `pai serve`
    in processes of their own, on one home and database, with the settings `env` besides;
    yields the API's URL and the two `pai serve` processes."""
    pai = str(Path(sys.executable).with_name("pai"))
    environment = {
        **os.environ,
        "PAI_HOME": str(home),
        "PAI_DATABASE_URL": database_url,
        "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PAI_SUBMISSION_RATE_LIMIT": str(10**9),
        "PAI_LOGIN_RATE_LIMIT": str(10**6),
        **(env or {}),
    }
    controller_port, api_port = free_port(), free_port()
    commands = [
        [pai, "serve", "controller", "--port", str(controller_port), *controller_options],
        [pai, "serve", "api", "--port", str(api_port), "--workers", str(api_workers)],
    ]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    base = f"http://127.0.0.1:{api_port}"
    try:
        for command, port in zip(commands, (controller_port, api_port), strict=True):
            role = command[2]
            output = (home / f"{role}.out").open("wb")
            processes[role] = subprocess.Popen(
                command, env=environment, stdout=output, stderr=output
            )
            wait_ready(f"http://127.0.0.1:{port}", processes[role], home)
        yield f"{base}/api/v2", processes
    finally:
        for process in reversed(processes.values()):
            process.terminate()
            process.wait(60)
        kill_processes_under(home)


def wait_ready(base: str, process: subprocess.Popen[bytes], home: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the platform did not start; see {home}")
        time.sleep(0.2)


def token_of(api: str, username: str, password: str) -> str:
    response = httpx.post(
        f"{api}/authn/basic/login", json={"username": username, "password": password}
    )
    token: str = response.raise_for_status().json()["token"]
    return token


def log_in(api: str, username: str, password: str) -> httpx.Client:
    token = token_of(api, username, password)
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


def measure_submissions(api: str, tokens: list[str], per_client: int, batch: str) -> float:
    """Accepted submissions per second, one keep-alive connection per client, all at once;
    `batch` makes the job names unique among the runs on one store.

    The clients are coroutines writing HTTP/1.1 on raw connections: a submission costs them
    about 0.1 ms of CPU where an httpx client in a thread costs 1.4 ms, and on this machine the
    clients share the server's two cores, so a heavier client would measure itself."""
    url = httpx.URL(api)
    return asyncio.run(_submit_all(url, tokens, per_client, batch))


async def _submit_all(url: httpx.URL, tokens: list[str], per_client: int, batch: str) -> float:
    connections = [await asyncio.open_connection(url.host, url.port) for _ in tokens]
    started = time.perf_counter()
    accepted = await asyncio.gather(
        *(
            _submit(reader, writer, f"{url.path}/jobs", token, f"{batch}-{index}", per_client)
            for index, ((reader, writer), token) in enumerate(zip(connections, tokens, strict=True))
        )
    )
    elapsed = time.perf_counter() - started
    for _, writer in connections:
        writer.close()
    return sum(accepted) / elapsed


async def _submit(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    path: str,
    token: str,
    client: str,
    count: int,
) -> int:
    for number in range(count):
        body = JOB_TEXT.format(
            name=f"bench-{client}-{number}", instances=1, cpu=4, command="true", vc="research"
        ).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: pai\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: text/yaml\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        status, answer = await _response(reader)
        if status != 202:
            raise RuntimeError(f"a submission got {status}: {answer.decode(errors='replace')}")
    return count


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status and body of one HTTP/1.1 response (the server sends Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    return int(lines[0].split(" ", 2)[1]), await reader.readexactly(length)


def percentile(values: list[float], fraction: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


@contextmanager
def store(kind: str, server_url: str, directory: Path) -> Iterator[str]:
    """A fresh, migrated store of `kind` (`sqlite`, or `postgresql` on `server_url`)."""
    if kind == "sqlite":
        url = default_database_url(directory)
    else:
        admin = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
        name = f"pai_bench_{secrets.token_hex(6)}"
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    database = Database(url)
    with database.exclusive() as connection:
        database.upgrade(connection)
    database.dispose()
    try:
        yield url
    finally:
        if kind != "sqlite":
            with admin.connect() as connection:
                connection.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            admin.dispose()


def measure_list_run(kind: str, server_url: str, jobs: int, requests: int) -> dict[str, Any]:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as directory:
        home = Path(directory)
        with store(kind, server_url, home) as url:
            database = Database(url)
            seed(database, jobs, rng)
            database.dispose()
            with (
                platform(home, url, 1) as (api, _),
                log_in(api, "admin", ADMIN_PASSWORD) as admin,
            ):
                latencies = measure_listing(admin, list_queries(rng, requests))
    return {
        "database": kind,
        "jobs_in_store": jobs,
        "list_p50_ms": round(percentile(latencies, 0.5), 2),
        "list_p99_ms": round(percentile(latencies, 0.99), 2),
    }


def measure_submit_run(
    kind: str, server_url: str, api_workers: int, clients: int, per_client: int, rounds: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as directory:
        home = Path(directory)
        with (
            store(kind, server_url, home) as url,
            platform(home, url, api_workers) as (api, processes),
            log_in(api, "admin", ADMIN_PASSWORD) as admin,
        ):
            holders = hold_cluster(admin)
            tokens = [token_of(api, *account) for account in research_users(admin, clients)]
            try:
                measure_submissions(api, tokens, per_client, "warm-up")
                meter = CpuMeter(processes, postgresql=kind == "postgresql")
                rates = [
                    measure_submissions(api, tokens, per_client, f"round{number}")
                    for number in range(rounds)
                ]
                spent = meter.seconds()
            finally:
                for holder in holders:
                    stop(admin, holder)
    return {
        "database": kind,
        "api_workers": api_workers,
        "clients": clients,
        "submissions_per_round": clients * per_client,
        "submissions_per_second": round(statistics.median(rates), 1),
        "slowest_round": round(min(rates), 1),
        "fastest_round": round(max(rates), 1),
        "cpu_ms_per_submission": {
            part: round(seconds * 1000 / (rounds * clients * per_client), 3)
            for part, seconds in spent.items()
        },
    }


class CpuMeter:
    """CPU time spent since it was made, by part: the API workers (`pai serve api` and its
    worker processes), the controller, PostgreSQL's server processes (when measured) and this
    client. It is where a submission's cost goes, and what limits the rate when the parts
    share a machine's cores. A process that starts in between counts whole; one that ends in
    between is not counted (a PostgreSQL backend closing, which spends little)."""

    def __init__(self, processes: dict[str, subprocess.Popen[bytes]], *, postgresql: bool):
        self._parts: dict[str, Callable[[], list[psutil.Process]]] = {
            "api_workers": partial(_with_children, processes["api"].pid),
            "controller": partial(_with_children, processes["controller"].pid),
            "client": lambda: [psutil.Process()],
        }
        if postgresql:
            self._parts["postgresql"] = _postgresql_processes
        self._start = self._now()

    def seconds(self) -> dict[str, float]:
        now = self._now()
        return {
            part: sum(spent - self._start[part].get(pid, 0.0) for pid, spent in now[part].items())
            for part in self._parts
        }

    def _now(self) -> dict[str, dict[int, float]]:
        """Each part's processes and the CPU seconds each has spent."""
        spent: dict[str, dict[int, float]] = {}
        for part, processes in self._parts.items():
            spent[part] = {}
            for process in processes():
                try:
                    times = process.cpu_times()
                except psutil.Error:  # it has just ended
                    continue
                spent[part][process.pid] = times.user + times.system
        return spent


def _with_children(pid: int) -> list[psutil.Process]:
    process = psutil.Process(pid)
    return [process, *process.children(recursive=True)]


def _postgresql_processes() -> list[psutil.Process]:
    return [
        process
        for process in psutil.process_iter(["name"])
        if (process.info["name"] or "").startswith("postgres")
    ]


def postgres_reachable(server_url: str) -> bool:
    try:
        engine = sqlalchemy.create_engine(server_url)
        with engine.connect():
            pass
        engine.dispose()
    except Exception:  # any driver or connection error: no PostgreSQL to measure
        return False
    return True


def run(args: argparse.Namespace) -> dict[str, Any]:
    kinds = ["sqlite"] + (["postgresql"] if postgres_reachable(args.postgres_url) else [])
    listings = [
        measure_list_run(kind, args.postgres_url, args.jobs, args.list_requests) for kind in kinds
    ]
    runs = [
        measure_submit_run(
            kind, args.postgres_url, workers, args.clients, args.submissions, args.rounds
        )
        for kind in kinds
        for workers in (1, 4)
    ]
    single = {r["database"]: r["submissions_per_second"] for r in runs if r["api_workers"] == 1}
    for entry in runs:
        entry["ratio_to_one_worker"] = round(
            entry["submissions_per_second"] / single[entry["database"]], 2
        )
    sqlite_listing = listings[0]
    return {
        "jobs_in_store": args.jobs,
        "list_p50_ms": sqlite_listing["list_p50_ms"],
        "list_p99_ms": sqlite_listing["list_p99_ms"],
        "submissions_per_second": max(r["submissions_per_second"] for r in runs),
        "listings": listings,
        "runs": runs,
    }


def hold_cluster(admin: httpx.Client) -> list[str]:
    """Jobs holding every cell of both VCs, so that the benchmark's jobs queue behind them:
    with nothing idle, none can run opportunistically either."""
    held = []
    for vc, instances in (("research", 1), ("default", 3)):
        text = JOB_TEXT.format(
            name=f"holds-{vc}", instances=instances, cpu=4, command="sleep 3600", vc=vc
        )
        response = admin.post("/jobs", content=text)
        response.raise_for_status()
        held.append(response.json()["name"])
    return held


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
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs seeded in the store")
    parser.add_argument("--clients", type=int, default=64, help="concurrent submitting clients")
    parser.add_argument(
        "--submissions", type=int, default=100, help="submissions per client in a round"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds measured after a warm-up")
    parser.add_argument("--list-requests", type=int, default=500, help="list requests timed")
    parser.add_argument(
        "--postgres-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="a PostgreSQL server to create the benchmark's databases in (skipped if away)",
    )
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    listing = Table(title=f"Listing jobs, {args.jobs:,} in the store (pages of 50)")
    for title in ("database", "p50 ms", "p99 ms"):
        listing.add_column(title, justify="right")
    for entry in result["listings"]:
        listing.add_row(entry["database"], str(entry["list_p50_ms"]), str(entry["list_p99_ms"]))
    submitting = Table(
        title=f"Accepted submissions per second, {args.clients} clients (median round)"
    )
    titles = ("database", "API workers", "submissions/s", "rounds", "ratio to 1 worker")
    for title in (*titles, "CPU ms per submission"):
        submitting.add_column(title, justify="right")
    for entry in result["runs"]:
        submitting.add_row(
            entry["database"],
            str(entry["api_workers"]),
            str(entry["submissions_per_second"]),
            f"{entry['slowest_round']} to {entry['fastest_round']}",
            str(entry["ratio_to_one_worker"]),
            ", ".join(f"{part} {ms}" for part, ms in entry["cpu_ms_per_submission"].items()),
        )
    Console().print(listing, submitting)


if __name__ == "__main__":
    main()
