"""After a chaos run: the tasks' own records, the store's view and what is left on the hosts,
as history records.

A run file (`task_program.py` writes it) becomes a `Run` from its first line to its last beat
or end. The store's view comes through the API as an administrator sees it. A host's leftovers
are the processes in its network namespace that carry a task's environment (`PAI_JOB_NAME`),
the task ports (15000-40000) listening there, and the task directories under the node directory
that belong to no job the store knows.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psutil

from pai.chaos.history import FinalJob, FinalTask, Remnant, Run
from pai.runtime.ports import DEFAULT_PORT_RANGE
from pai.sdk import Client


def read_runs(runs: Path) -> list[Run]:
    found = []
    for path in sorted(runs.glob("*/*/*-*")):
        job, task = path.parent.parent.name, path.parent.name
        role, _, index = task.rpartition("-")
        lines = path.read_text().splitlines()
        if not lines:
            continue
        first = json.loads(lines[0])
        end, exit_code = first["start"], None
        for line in lines[1:]:
            try:
                if line.startswith("{"):
                    last = json.loads(line)
                    end, exit_code = last["end"], last["exit_code"]
                else:
                    end = float(line)
            except ValueError:  # the line a killed run was writing
                continue
        found.append(
            Run(
                job,
                role,
                int(index),
                first["host"],
                first["job_attempt"],
                first["task_attempt"],
                first["start"],
                end,
                exit_code,
            )
        )
    return found


def final_jobs(client: Client) -> list[FinalJob]:
    finals = []
    for listed in client.jobs(limit=50000):
        name = f"{listed.username}~{listed.name}"
        job = client.job(name)
        tasks = tuple(
            FinalTask(
                role, task.task_index, task.task_state, task.container_ip, task.container_exit_code
            )
            for role, task in job.tasks()
        )
        finals.append(
            FinalJob(name, job.state, job.job_status.app_exit_code, job.job_status.retries, tasks)
        )
    return finals


def _in_namespace(namespace: str, *command: str) -> str:
    done = subprocess.run(
        ["nsenter", f"--net=/run/netns/{namespace}", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def host_remnants(
    host: str, address: str, namespace: str, node_dirs: list[Path], known_jobs: set[str]
) -> list[Remnant]:
    """What task processes, ports and directories are left on `host`."""
    found = []
    listed = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
    )
    for pid in listed.stdout.split():
        try:
            process = psutil.Process(int(pid))
            job = process.environ().get("PAI_JOB_NAME")
            command = " ".join(process.cmdline())[:200]
        except psutil.Error:
            continue
        if job is not None:
            found.append(Remnant(address, "process", job, f"pid {pid}: {command}"))
    low, high = DEFAULT_PORT_RANGE
    for line in _in_namespace(namespace, "ss", "-Hltn").splitlines():
        port = int(line.split()[3].rpartition(":")[2])
        if low <= port < high:
            found.append(Remnant(address, "port", None, f"port {port} listening"))
    for node_dir in node_dirs:
        for job_dir in sorted((node_dir / "jobs").glob("*")):
            if job_dir.name not in known_jobs:
                found.append(Remnant(address, "directory", None, str(job_dir)))
    return found
