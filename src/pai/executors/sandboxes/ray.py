"""A Ray cluster of several hosts on one machine, for tests, benchmarks and trying the Ray engine.

The head runs in this network namespace, on a bridge the sandbox creates; each worker runs in a
network namespace of its own, with its own address on a veth pair to that bridge, so tasks on
two workers talk over a network as on two machines. Workers may declare GPUs the machine lacks:
Ray then reports them and PAI hands out their indices, which is all GPU binding is made of.
Stopping a worker kills every process in its namespace, as a machine that goes down does.

Everything runs with Ray's token authentication on, and Ray's worker processes are kept below
PAI's task port range, as docs/deploy.md asks of a real cluster. Needs Linux and root (for
`ip netns`); `close()` removes every namespace, link and directory it made.

    with RaySandbox(Path("/tmp/sandbox"), [WorkerSpec("w1", gpus=2), WorkerSpec("w2")]) as ray:
        ...  # a driver started with `ray.env` joins `ray.address`
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from pai.executors.local import kill_processes_under
from pai.executors.sandboxes.base import Sandbox

OBJECT_STORE_BYTES = 80 * 1024 * 1024
# Ray's own ports on a worker: fixed, and below PAI's task ports (15000-40000).
START_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_raylet_start_wait_time_s": "120"}
"""Ray's settings for every node of the sandbox: no usage reports, and a raylet that has up to
two minutes to register with the head: on a busy machine Ray's default is too short, and `ray
start` fails with "GCS cannot find the node ... increase RAY_raylet_start_wait_time_s"."""
START_SECONDS = 180
"""How long `ray start` may take: longer than the raylet's registration may (`START_ENV`)."""
HEAD_AGENT_PORTS = (
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "metrics-export-port",
)
"""The head's ports that Ray would otherwise take from fixed defaults: the head shares this
machine's network with any other Ray (another sandbox's head), so it takes free ones."""
WORKER_PORTS = (
    "--node-manager-port=6380",
    "--object-manager-port=6381",
    "--metrics-export-port=6382",
    "--dashboard-agent-grpc-port=6383",
    "--dashboard-agent-listen-port=6384",
    "--runtime-env-agent-port=6385",
    "--min-worker-port=10002",
    "--max-worker-port=14999",
)
KILL_ROUNDS = 5
"""Rounds of killing a host's processes, for those started while the previous round ran."""
# A killed worker counts as gone after about 3 s instead of Ray's default of about 30 s.
HEAD_ENV = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


class SandboxError(RuntimeError):
    """The sandbox cannot be built here (not root, no `ip`, a command failed)."""


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    cpus: int = 2
    gpus: int = 0
    resources: Mapping[str, int] = field(default_factory=dict)
    """Ray's custom resources of the worker (`ray start --resources`), such as the devices of a
    kind Ray has no name for: `{"acc.example/npu": 2}`."""


class RaySandbox(Sandbox):
    """See the module docstring. `start()` (or `with`) builds it, `close()` takes it down."""

    def __init__(
        self,
        root: Path,
        workers: Sequence[WorkerSpec],
        head_env: Mapping[str, str] = HEAD_ENV,
        starts_at_once: int = 1,
    ) -> None:
        """`head_env`: Ray's settings for the head (its health check's, by default);
        `starts_at_once`: how many workers' `ray start` run together (more start a large
        sandbox sooner, as long as the machine keeps within Ray's deadlines, `START_ENV`)."""
        self.root = root
        self._starts_at_once = starts_at_once
        self._head_env = dict(head_env)
        self.workers = {worker.name: worker for worker in workers}
        self._tag = f"pai{secrets.token_hex(3)}"
        self._subnet = _free_subnet()
        hosts = self._subnet.hosts()
        self.head_ip = str(next(hosts))
        self._addresses = {name: str(next(hosts)) for name in self.workers}
        self._port = 0
        self._token = secrets.token_hex(32)
        self._created: list[list[str]] = []  # commands that undo what was made, newest last

    @property
    def address(self) -> str:
        """The head's `HOST:PORT`, for `pai up --ray-address` and `ray start --address`."""
        return f"{self.head_ip}:{self._port}"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs in its environment to join this cluster."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self._token}

    def worker_address(self, name: str) -> str:
        return self._addresses[name]

    def namespace(self, name: str) -> str:
        return f"{self._tag}-{name}"

    def start(self) -> None:
        if os.geteuid() != 0 or shutil.which("ip") is None:
            raise SandboxError("a Ray sandbox needs root and iproute2 (`ip netns`)")
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._make_network()
            self._start_head()
            with ThreadPoolExecutor(self._starts_at_once) as starting:
                # list(): the first failure is raised here
                list(starting.map(self.start_worker, self.workers))
        except BaseException:
            self.close()
            raise

    def stop_worker(self, name: str) -> None:
        """Kill every process of the worker, tasks included, as a machine going down would."""
        _kill_all([self.namespace(name)])

    def cut(self, name: str) -> None:
        """Cut the worker's network link (its veth on the bridge goes down): it runs on,
        unreachable, as behind a failed switch."""
        self._run(["ip", "link", "set", self._veth(name), "down"])

    def reconnect(self, name: str) -> None:
        """Restore the link that `cut` took down."""
        self._run(["ip", "link", "set", self._veth(name), "up"])

    def _veth(self, name: str) -> str:
        return f"{self._tag}v{list(self.workers).index(name)}"

    def is_running(self, name: str) -> bool:
        """Whether anything runs on the worker (stopped: nothing does)."""
        return bool(self.pids(name))

    def pids(self, name: str) -> list[int]:
        """The processes that run on the worker: Ray's, PAI's agent, the tasks."""
        return _namespace_pids(self.namespace(name))

    def start_worker(self, name: str) -> None:
        """Start (again) the worker's Ray node; it joins the cluster with a new node id.

        On a busy machine a node's first request to the head can pass Ray's deadline, and its
        `ray start` fails: it is tried once more."""
        try:
            _finish(self._worker_process(name))
        except SandboxError:
            self.stop_worker(name)
            _finish(self._worker_process(name))

    def close(self) -> None:
        """Take everything down; safe to call more than once and after a failed start."""
        made = [name for name in self.workers if Path("/run/netns", self.namespace(name)).exists()]
        # All workers at once: one wait for every process killed, however many workers.
        _kill_all([self.namespace(name) for name in made])
        kill_processes_under(self.root)  # the head's processes, with their children
        while self._created:
            subprocess.run(self._created.pop(), capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- building ---------------------------------------------------------------------------------

    def _make_network(self) -> None:
        bridge = f"{self._tag}br"
        prefix = self._subnet.prefixlen
        self._run(["ip", "link", "add", bridge, "type", "bridge"], ["ip", "link", "del", bridge])
        self._run(["ip", "addr", "add", f"{self.head_ip}/{prefix}", "dev", bridge])
        self._run(["ip", "link", "set", bridge, "up"])
        for name in self.workers:
            namespace, veth = self.namespace(name), self._veth(name)
            self._run(["ip", "netns", "add", namespace], ["ip", "netns", "del", namespace])
            pair = ["type", "veth", "peer", "eth0", "netns", namespace]
            self._run(["ip", "link", "add", veth, *pair])
            self._run(["ip", "link", "set", veth, "master", bridge, "up"])
            inside = ["ip", "-n", namespace]
            self._run([*inside, "addr", "add", f"{self._addresses[name]}/{prefix}", "dev", "eth0"])
            self._run([*inside, "link", "set", "eth0", "up"])
            self._run([*inside, "link", "set", "lo", "up"])

    def _start_head(self) -> None:
        """Start the head's Ray node. On a busy machine its raylet can take longer to register
        than `ray start` waits (30 s, fixed), and the start fails: it is tried once more, after
        what the first try left running is gone."""
        try:
            self._head_process()
        except SandboxError:
            kill_processes_under(self.root / "head")
            self._head_process()

    def _head_process(self) -> None:
        self._port = _free_port(self.head_ip)
        _finish(
            subprocess.Popen(
                [
                    *self._ray_start("head"),
                    "--head",
                    f"--node-ip-address={self.head_ip}",
                    f"--port={self._port}",
                    "--num-cpus=0",
                    "--num-gpus=0",
                    "--include-dashboard=false",
                    *(f"--{option}={_free_port(self.head_ip)}" for option in HEAD_AGENT_PORTS),
                ],
                env=self._environment(self._head_env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )

    def _worker_process(self, name: str) -> subprocess.Popen[bytes]:
        worker = self.workers[name]
        # nsenter, not `ip netns exec`: that also mounts a sysfs of the namespace's own over
        # /sys, which hides the cgroup file systems a container runtime on the worker needs.
        return subprocess.Popen(
            [
                "nsenter",
                f"--net=/run/netns/{self.namespace(name)}",
                *self._ray_start(name),
                f"--address={self.address}",
                f"--node-ip-address={self._addresses[name]}",
                f"--node-name={name}",
                f"--num-cpus={worker.cpus}",
                f"--num-gpus={worker.gpus}",
                f"--resources={json.dumps(dict(worker.resources))}",
                *WORKER_PORTS,
            ],
            env=self._environment({}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def _ray_start(self, node: str) -> list[str]:
        return [
            str(Path(sys.executable).with_name("ray")),
            "start",
            f"--temp-dir={self.root / node}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--disable-usage-stats",
            # PAI's driver takes no output from Ray's workers (`log_to_driver=False`): the
            # process that would send it costs each node 100 MB and seconds of CPU to start.
            "--include-log-monitor=false",
        ]

    def _environment(self, extra: dict[str, str]) -> dict[str, str]:
        return {**os.environ, **self.env, **extra, **START_ENV}

    def _run(self, command: list[str], undo: list[str] | None = None) -> None:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SandboxError(f"{' '.join(command)}: {done.stderr.strip()}")
        if undo is not None:
            self._created.append(undo)


def _finish(process: subprocess.Popen[bytes]) -> None:
    output, _ = process.communicate(timeout=START_SECONDS)
    if process.returncode != 0:
        tail = output.decode(errors="replace")[-2000:]
        raise SandboxError(f"`ray start` failed with status {process.returncode}:\n{tail}")


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0/13 that no route of this machine overlaps."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False)
    taken = [
        ipaddress.ip_network(line.split()[0], strict=False)
        for line in routes.stdout.splitlines()
        if line and line.split()[0][0].isdigit()
    ]
    for _ in range(100):
        candidate = ipaddress.IPv4Network(
            f"10.{random.randint(200, 207)}.{random.randint(0, 255)}.0/24"
        )
        if not any(candidate.overlaps(route) for route in taken):
            return candidate
    raise SandboxError("no free 10.200.0.0/13 subnet for the sandbox's network")


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _namespace_pids(namespace: str) -> list[int]:
    listed = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in listed.stdout.split()]


def _kill_all(namespaces: list[str]) -> None:
    """SIGKILL every process of the namespaces until none is left: one started meanwhile (Ray
    starting a worker for an actor it restarts, as the raylet went) goes too, as it would with
    the machine."""
    for _ in range(KILL_ROUNDS):
        processes = []
        for pid in [pid for namespace in namespaces for pid in _namespace_pids(namespace)]:
            try:
                process = psutil.Process(pid)
                process.send_signal(signal.SIGKILL)
                processes.append(process)
            except psutil.NoSuchProcess:
                continue
        if not processes:
            return
        psutil.wait_procs(processes, timeout=10)
