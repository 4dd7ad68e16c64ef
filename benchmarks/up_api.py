"""How many submissions `pai up` takes in with each number of API workers: the figures behind
its `--api-workers` default.

Each run starts `pai up --api-workers N` on a fresh home (SQLite, this machine as its one-node
cluster), cordons the node so that the jobs wait and no task competes with the server for the
CPU, and has wrk (a load generator written in C, `apt-get install wrk`, so the clients take
little of the cores the server needs) submit small jobs over `--connections` keep-alive
connections for `--seconds`; the rate counts accepted (202) submissions.

    python benchmarks/up_api.py                      # a table; N = 0, 1, 2, 4
    python benchmarks/up_api.py --workers 0 2 --json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ADMIN_PASSWORD = secrets.token_urlsafe(12)
JOB_TEXT = """protocolVersion: 2
name: %s
type: job
prerequisites:
  - {type: dockerimage, name: image, uri: "python:3.11"}
taskRoles:
  train:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: ["python train.py"]
"""
SUBMITTING = """
local thread_count = 0
function setup(thread)
  thread_count = thread_count + 1
  thread:set("prefix", "t" .. thread_count)
end
local sent = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "text/yaml"
wrk.headers["Authorization"] = "Bearer %(token)s"
request = function()
  sent = sent + 1
  return wrk.format(nil, "/api/v2/jobs", nil, string.format(%(job)s, prefix .. "-" .. sent))
end
done = function(summary, latency, requests)
  local errors = summary.errors
  local failed = errors.status + errors.connect + errors.read + errors.write + errors.timeout
  io.write(string.format('{"requests": %%d, "failed": %%d, "seconds": %%f, "p50_ms": %%f}\\n',
    summary.requests, failed, summary.duration / 1e6, latency:percentile(50) / 1000))
end
"""
"""wrk's script: POSTs of job files named uniquely per thread; prints its summary as JSON."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def pai_up(home: Path, api_workers: int) -> Iterator[str]:
    """`pai up --api-workers N` on `home`, stopped (Ctrl-C) when the block ends; yields its
    API's URL."""
    port = free_port()
    environment = {
        **os.environ,
        "PAI_HOME": str(home),
        "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PAI_SUBMISSION_RATE_LIMIT": str(10**9),
    }
    environment.pop("PAI_DATABASE_URL", None)
    command = [str(Path(sys.executable).with_name("pai")), "up", "--port", str(port)]
    with open(home / "up.out", "wb") as output:
        process = subprocess.Popen(
            [*command, "--api-workers", str(api_workers)],
            env=environment,
            stdout=output,
            stderr=output,
        )
    api = f"http://127.0.0.1:{port}/api/v2"
    try:
        deadline = time.monotonic() + 120
        while not _answers(api):
            if process.poll() is not None or time.monotonic() > deadline:
                printed = (home / "up.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"pai up did not start:\n{printed}")
            time.sleep(0.2)
        yield api
    finally:
        process.send_signal(2)
        process.wait(60)


def _answers(api: str) -> bool:
    try:
        return httpx.get(f"{api}/info", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def admin_token(api: str) -> str:
    login = {"username": "admin", "password": ADMIN_PASSWORD}
    answer = httpx.post(f"{api}/authn/basic/login", json=login).raise_for_status()
    token: str = answer.json()["token"]
    return token


def cordon_every_node(api: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    for node in httpx.get(f"{api}/cluster/nodes", headers=headers).raise_for_status().json():
        cordon = f"{api}/cluster/nodes/{node['name']}/cordon"
        httpx.put(cordon, headers=headers, json={"reason": "benchmark"}).raise_for_status()


def measure(wrk: str, api_workers: int, connections: int, seconds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pai-up-bench-") as directory:
        home = Path(directory)
        with pai_up(home, api_workers) as api:
            token = admin_token(api)
            cordon_every_node(api, token)
            script = home / "submit.lua"
            script.write_text(SUBMITTING % {"token": token, "job": json.dumps(JOB_TEXT)})
            threads = min(connections, os.cpu_count() or 1)
            load = [f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "-s", str(script)]
            ran = subprocess.run(
                [wrk, *load, api.removesuffix("/api/v2")],
                capture_output=True,
                text=True,
                check=True,
            )
    summary = json.loads(ran.stdout.strip().splitlines()[-1])
    accepted = summary["requests"] - summary["failed"]
    return {
        "api_workers": api_workers,
        "connections": connections,
        "seconds": round(summary["seconds"], 1),
        "accepted": accepted,
        "failed": summary["failed"],
        "submissions_per_second": round(accepted / summary["seconds"], 1),
        "p50_ms": round(summary["p50_ms"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 4])
    parser.add_argument("--connections", type=int, default=64, help="wrk's connections")
    parser.add_argument("--seconds", type=int, default=15, help="how long each run submits")
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if wrk is None:
        parser.error("wrk is not installed (apt-get install wrk)")
    runs = [measure(wrk, n, args.connections, args.seconds) for n in args.workers]
    result = {"cores": len(os.sched_getaffinity(0)), "runs": runs}
    if args.json:
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"`pai up` submissions accepted per second, {args.connections} connections, "
        f"{result['cores']} cores"
    )
    for title in ("--api-workers", "submissions/s", "accepted", "failed", "p50 ms"):
        table.add_column(title, justify="right")
    for run in runs:
        table.add_row(
            str(run["api_workers"]),
            str(run["submissions_per_second"]),
            str(run["accepted"]),
            str(run["failed"]),
            str(run["p50_ms"]),
        )
    Console().print(table)


if __name__ == "__main__":
    main()
