"""Many small hosts in a Ray sandbox, and a gang of tasks that must span all of them.

What a test and a benchmark of PAI at an organisation's size share: the hosts (each a small Ray
node declaring `HOST_GPUS` GPUs, so that many fit on one machine), the cluster file and settings
that put PAI on them, and a job of one GPU per task, `HOST_GPUS` times as many tasks as hosts,
which only starts when every host runs its share. Each task listens on its own port and reaches
a task on another host, found, as a user's job finds its peers, only through PAI's variables.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec
from pai.sdk import Client

HOST_GPUS = 4
RING_ROLE = "ring"
GRACE_SECONDS = 1
"""The gang's grace period: its tasks do nothing on SIGTERM worth waiting for, and a lost host's
tasks are given up that much sooner (docs/deploy.md, Losing a node)."""
RING_PROGRAM = """python3 - <<'EOF'
import os, socket, threading, time
me = int(os.environ["PAI_TASK_INDEX"])
prefix = "PAI_HOST_IP_ring_"
hosts = {int(key[len(prefix):]): ip for key, ip in os.environ.items() if key.startswith(prefix)}
def port(index):
    return int(os.environ[f"PAI_PORT_LIST_ring_{index}_ring"])
server = socket.create_server((hosts[me], port(me)))
def serve():
    while True:
        connection, _ = server.accept()
        with connection:
            connection.sendall(f"task {me} on {hosts[me]}".encode())
threading.Thread(target=serve, daemon=True).start()
after = [(me + step) % len(hosts) for step in range(1, len(hosts))]
peer = next(index for index in after if hosts[index] != hosts[me])
for _ in range(900):
    try:
        with socket.create_connection((hosts[peer], port(peer)), timeout=2) as connection:
            print(f"task {me} on {hosts[me]} reached {connection.recv(100).decode()}", flush=True)
            break
    except OSError:
        time.sleep(0.2)
else:
    print(f"task {me} on {hosts[me]} never reached task {peer}", flush=True)
time.sleep(3600)
EOF"""
"""Serves its port, then prints which task (on which host) it reached: the next task by index
on another host. It goes on serving, so that every task's peer answers."""


def small_hosts(count: int) -> list[WorkerSpec]:
    """`count` hosts, `h01`, `h02`, ..., each declaring `HOST_GPUS` GPUs and as many CPUs."""
    return [
        WorkerSpec(f"h{number:02d}", cpus=HOST_GPUS, gpus=HOST_GPUS)
        for number in range(1, count + 1)
    ]


def cluster_file(sandbox: RaySandbox) -> str:
    """A cluster file naming every host of the sandbox, with its address, all in one VC."""
    nodes = "".join(
        f"  - {{cellType: NODE, cellAddress: {name}, "
        f"nodeAddress: {sandbox.worker_address(name)}}}\n"
        for name in sandbox.workers
    )
    return (
        "physicalCluster:\n"
        "  skuTypes: {FAKE-GPU: {gpu: 1, cpu: 1, memory: 64Mi}}\n"
        f"  cellTypes: {{NODE: {{childCellType: FAKE-GPU, childCellNumber: {HOST_GPUS}, "
        "isNodeLevel: true}}\n"
        f"  physicalCells:\n{nodes}"
        "virtualClusters:\n"
        f"  default: {{virtualCells: [{{cellType: NODE, cellNumber: {len(sandbox.workers)}}}]}}\n"
    )


def pai_settings(sandbox: RaySandbox) -> dict[str, str]:
    """The settings (environment variables) of a PAI control plane on the sandbox."""
    return {
        **sandbox.env,
        "PAI_ENGINE": "ray",
        "PAI_RAY_ADDRESS": sandbox.address,
        "PAI_RAY_NODE_DIR": str(sandbox.root / "nodes"),
    }


def ring_job(name: str, tasks: int) -> str:
    """A gang of `tasks` tasks of one GPU each, running `RING_PROGRAM`; never retried for the
    user's sake (`jobRetryCount: 0`), with a grace period of `GRACE_SECONDS`."""
    commands = "".join(f"        {line}\n" for line in RING_PROGRAM.splitlines())
    return (
        f"protocolVersion: 2\nname: {name}\ntype: job\njobRetryCount: 0\n"
        "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\n"
        f"extras: {{podGracefulDeletionTimeoutSec: {GRACE_SECONDS}}}\n"
        f"taskRoles:\n  {RING_ROLE}:\n    instances: {tasks}\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 64, gpu: 1, ports: {ring: 1}}\n"
        f"    commands:\n      - |\n{commands}"
    )


def ring_peer(hosts: Mapping[int, str], index: int) -> int:
    """The task that task `index` reaches (see `RING_PROGRAM`), given every task's host."""
    after = [(index + step) % len(hosts) for step in range(1, len(hosts))]
    return next(other for other in after if hosts[other] != hosts[index])


def wait_all_alive(client: Client, hosts: int, timeout: float) -> None:
    """Wait until PAI shows `hosts` nodes alive."""
    deadline = time.monotonic() + timeout
    while len([node for node in client.nodes() if node.engine_state == "alive"]) < hosts:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {hosts} hosts alive in PAI after {timeout:g} s")
        time.sleep(0.2)


def wait_all_running(client: Client, name: str, tasks: int, timeout: float) -> dict[int, str]:
    """Wait until the job runs all its `tasks` tasks; their hosts' addresses by index."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.job(name)
        running = {
            task.task_index: task.container_ip
            for _, task in job.tasks()
            if task.task_state == "RUNNING" and task.container_ip
        }
        if len(running) == tasks:
            return running
        if job.finished or time.monotonic() > deadline:
            raise TimeoutError(
                f"job {name} ({job.state}) runs {len(running)} of its {tasks} tasks "
                f"after {timeout:g} s"
            )
        time.sleep(0.2)
