"""Two tasks of one job on two nodes find each other through the PAI_* environment alone."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from pai.executors.base import LogStream
from pai.runtime.env import JobIdentity, RoleInfo, TaskPlacement, build_task_env
from pai.runtime.ports import PortAllocator

if TYPE_CHECKING:
    from conftest import Harness

SERVER = """
import os, socket
me = (os.environ["PAI_CONTAINER_HOST_IP"], int(os.environ["PAI_PORT_LIST_server_0_data"]))
with socket.create_server(me) as server:
    connection, (peer, _) = server.accept()
    with connection:
        request = connection.recv(1024).decode()
        connection.sendall(f"pong to {request}".encode())
print(f"server got {request!r} from {peer}")
"""

CLIENT = """
import os, socket, time
server = (os.environ["PAI_HOST_IP_server_0"], int(os.environ["PAI_PORT_LIST_server_0_data"]))
me = (os.environ["PAI_CONTAINER_HOST_IP"], 0)
deadline = time.monotonic() + 30
while True:
    try:
        connection = socket.create_connection(server, timeout=5, source_address=me)
        break
    except ConnectionRefusedError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
with connection:
    name = os.environ["PAI_CURRENT_TASK_ROLE_NAME"] + "-" + os.environ["PAI_TASK_INDEX"]
    connection.sendall(name.encode())
    print("client got", repr(connection.recv(1024).decode()))
"""


DUMP_ENV = """
import json, os
prefixes = ("PAI_", "FC_", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(prefixes)}))
"""
JOB = JobIdentity(user="alice", job_name="pingpong", virtual_cluster="default")
ROLES = [
    RoleInfo("server", instances=1, cpu=1, memory_mb=512, gpu=1),
    RoleInfo("client", instances=1, cpu=1, memory_mb=512, gpu=0),
]
NODES = {"server": ("node1", "127.0.0.1"), "client": ("node2", "127.0.0.2")}


def place_job() -> dict[tuple[str, int], TaskPlacement]:
    """Ports for both tasks on their nodes, as the controller would allocate them."""
    allocator = PortAllocator()
    return {
        (role, 0): TaskPlacement(
            node,
            address,
            [0] if role == "server" else [],
            allocator.allocate(f"pingpong-{role}-0", node, address, {"data": 1}),
        )
        for role, (node, address) in NODES.items()
    }


def test_a_task_sees_its_pai_environment(harness: Harness) -> None:
    placements = place_job()
    working_dir = harness.root / "work" / "client"
    env = build_task_env(JOB, ROLES, "client", 0, placements, working_dir=str(working_dir))

    harness.run(
        "env-dump",
        f"{sys.executable} - <<'EOF'\n{DUMP_ENV}\nEOF\n",
        role="client",
        node="node2",
        address="127.0.0.2",
        working_dir=working_dir,
        env=env,
    )

    seen = json.loads(harness.executor.logs("env-dump", LogStream.STDOUT))
    assert seen == env
    assert seen["PAI_HOST_IP_server_0"] == "127.0.0.1"
    assert seen["PAI_CONTAINER_HOST_IP"] == "127.0.0.2"
    assert seen["PAI_WORK_DIR"] == str(working_dir)
    assert seen["CUDA_VISIBLE_DEVICES"] == "" and seen["NVIDIA_VISIBLE_DEVICES"] == "none"


def test_two_tasks_on_two_nodes_exchange_data_over_tcp(harness: Harness) -> None:
    placements = place_job()

    for role, source in (("server", SERVER), ("client", CLIENT)):
        placement = placements[(role, 0)]
        working_dir = harness.root / "work" / role
        harness.launch(
            f"pingpong-{role}-0",
            f"{sys.executable} - <<'EOF'\n{source}\nEOF\n",
            role=role,
            node=placement.node,
            address=placement.host_ip,
            ports=placement.ports,
            working_dir=working_dir,
            env=build_task_env(JOB, ROLES, role, 0, placements, working_dir=str(working_dir)),
        )

    assert harness.wait_finished("pingpong-server-0").exit_code == 0
    assert harness.wait_finished("pingpong-client-0").exit_code == 0
    logs = harness.executor.logs
    assert logs("pingpong-server-0", LogStream.STDOUT) == (
        b"server got 'client-0' from 127.0.0.2\n"
    )
    assert logs("pingpong-client-0", LogStream.STDOUT) == b"client got 'pong to client-0'\n"
