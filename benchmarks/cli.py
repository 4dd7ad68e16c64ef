"""How fast the `pai` command answers, against `python -c pass` as the floor.

`pai --help`, `pai jobs`, `pai job NAME` and `pai logs NAME` run as a user runs them (the
installed console script, a new process each time, output to a pipe as in a script) against a
running `pai up` on this machine whose store holds `--jobs` jobs of the logged-in user (default
1,000): one that ran and printed a log, the others submitted through the API and stopped.
`pai jobs` lists the newest 50 of them; NAME is the job that ran.

Each command runs once to warm the caches, then `--runs` rounds run every command once in turn,
so that a change in the machine's load touches all of them alike. The report gives each
command's median, fastest and slowest run, the ratio of its median to the floor's, the median
CPU time it spent, and the load average before and after (on a shared machine other work slows
every command down; its CPU time varies less).

    python benchmarks/cli.py            # a Rich table
    python benchmarks/cli.py --json     # {"floor_s", "commands": [{"command", "median_s", ...}]}

`--pai COMMAND` times another build of `pai` against the same platform (the platform itself is
always this checkout's), to compare two versions under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api import free_port, wait_ready  # this directory's API benchmark starts servers alike

from pai.executors.local import kill_processes_under
from pai.sdk import Client

PAI = str(Path(sys.executable).with_name("pai"))
ADMIN_PASSWORD = secrets.token_urlsafe(12)
LOGGED_JOB = "logged"
TARGETS_S = {"pai --help": 0.25, "pai jobs": 0.35}
"""Issue 29's targets for the median on a 2-core machine."""

JOB = """protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
taskRoles:
  main:
    instances: 1
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0}}
    commands: ["{command}"]
"""


@dataclass(frozen=True)
class Timed:
    """A command, how long each of its runs took and the CPU time each spent, in seconds."""

    label: str
    argv: list[str]
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)


@contextmanager
def running_platform(home: Path) -> Iterator[str]:
    """`pai up` on a free port with tasks as processes on this machine; yields its URL."""
    port = free_port()
    environment = {
        **os.environ,
        "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PAI_ISOLATION": "host",
        "PAI_SUBMISSION_RATE_LIMIT": str(10**9),
    }
    output = (home / "up.out").open("wb")
    process = subprocess.Popen(
        [PAI, "up", "--port", str(port), "--home", str(home / "pai")],
        env=environment,
        stdout=output,
        stderr=output,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, home)
        yield url
    finally:
        process.terminate()
        process.wait(60)
        kill_processes_under(home)


def fill_store(client: Client, jobs: int) -> None:
    """One job that runs and logs, then `jobs - 1` that are submitted and stopped; returns
    when every one of them has ended."""
    client.wait(client.submit(JOB.format(name=LOGGED_JOB, command="seq 1 2000")).name, timeout=120)
    names = [
        client.submit(JOB.format(name=f"stopped-{number:05d}", command="sleep 600")).name
        for number in range(jobs - 1)
    ]
    for name in names:
        client.stop(name)
    deadline = time.monotonic() + 600
    while client.jobs(state=["WAITING", "RUNNING", "STOPPING"], limit=1):
        if time.monotonic() > deadline:
            raise RuntimeError("the stopped jobs did not end within 10 minutes")
        time.sleep(0.5)


def run_once(argv: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """The seconds `argv` took and the CPU seconds it spent (less sensitive to other work on
    the machine than the time it took)."""
    spent_before = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=environment, timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode(errors='replace')}")
    return elapsed, _children_cpu() - spent_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(commands: list[Timed], environment: dict[str, str], runs: int) -> None:
    for command in commands:
        run_once(command.argv, environment)  # warm-up: bytecode and file caches
    for _ in range(runs):
        for command in commands:
            elapsed, cpu = run_once(command.argv, environment)
            command.seconds.append(elapsed)
            command.cpu_seconds.append(cpu)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pai-bench-cli-") as directory:
        home = Path(directory)
        environment = {key: value for key, value in os.environ.items() if key != "PAI_SERVER"}
        environment["PAI_CONFIG"] = str(home / "client-config")
        with running_platform(home) as url:
            with Client.login(url, "admin", ADMIN_PASSWORD) as client:
                fill_store(client, args.jobs)
            login = [PAI, "login", "--server", url, "--username", "admin"]
            run_once([*login, "--password", ADMIN_PASSWORD], environment)
            pai = shlex.split(args.pai)
            commands = [
                Timed("python -c pass", [sys.executable, "-c", "pass"]),
                Timed("pai --help", [*pai, "--help"]),
                Timed("pai jobs", [*pai, "jobs"]),
                Timed("pai job NAME", [*pai, "job", LOGGED_JOB]),
                Timed("pai logs NAME", [*pai, "logs", LOGGED_JOB]),
            ]
            load_before = os.getloadavg()[0]
            measure(commands, environment, args.runs)
            load_after = os.getloadavg()[0]
    floor = statistics.median(commands[0].seconds)
    return {
        "pai": args.pai,
        "jobs_in_store": args.jobs,
        "runs": args.runs,
        "load_average_before": round(load_before, 2),
        "load_average_after": round(load_after, 2),
        "floor_s": round(floor, 3),
        "commands": [
            {
                "command": command.label,
                "median_s": round(statistics.median(command.seconds), 3),
                "fastest_s": round(min(command.seconds), 3),
                "slowest_s": round(max(command.seconds), 3),
                "ratio_to_floor": round(statistics.median(command.seconds) / floor, 1),
                "cpu_median_s": round(statistics.median(command.cpu_seconds), 3),
                "target_s": TARGETS_S.get(command.label),
            }
            for command in commands
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the store (at least 1)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command")
    parser.add_argument(
        "--pai", default=PAI, help="the pai command to time (default: this Python's)"
    )
    args = parser.parse_args()
    if args.jobs < 1 or args.runs < 1:
        parser.error("--jobs and --runs must be at least 1")
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"`pai` against `pai up` with {args.jobs:,} jobs, {args.runs} runs each "
        f"(load average {result['load_average_before']} → {result['load_average_after']})"
    )
    titles = ("median s", "fastest s", "slowest s", "ratio to floor", "CPU s", "target s")
    table.add_column("command")
    for title in titles:
        table.add_column(title, justify="right")
    for entry in result["commands"]:
        target = entry["target_s"]
        table.add_row(
            entry["command"],
            f"{entry['median_s']:.3f}",
            f"{entry['fastest_s']:.3f}",
            f"{entry['slowest_s']:.3f}",
            f"{entry['ratio_to_floor']:g}",
            f"{entry['cpu_median_s']:.3f}",
            "-" if target is None else f"≤ {target:g}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
