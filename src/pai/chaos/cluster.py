"""The cluster a chaos run storms: a Ray head and worker hosts in network namespaces
(`RaySandbox`), a PostgreSQL of its own, two controllers (one acts, one stands by) and two API
workers, each a `pai serve` process that the run may SIGKILL and start again as systemd's
`Restart=always` would.

All of PAI's processes share one home and one database, as in docs/deploy.md section 11; the
tasks run on the hosts (`PAI_ISOLATION=host`), as root, so that they can record their runs into
the run's directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from pai.chaos.postgres import PostgresCluster
from pai.executors.local import kill_processes_under
from pai.executors.sandboxes.ray import RaySandbox, SandboxError, WorkerSpec

ADMIN_PASSWORD = "chaos-Admin-password-1"
WORKERS = ("w1", "w2", "w3")
GPUS_PER_HOST = 2
NODE_TIMEOUT = 15.0
"""`PAI_RAY_NODE_TIMEOUT`: long enough that a controller's failover does not fence every task,
short enough that a cut host's tasks run again elsewhere within a short run."""
LEASE_SECONDS = 3.0
DISK_BYTES = 256 * 1024 * 1024
"""The size of each host's disk for its tasks (a tmpfs), so that filling it costs little."""
DISK_FLOOR = "16MiB"
START_SECONDS = 90.0
RAY_STARTS = 3
"""Tries of `ray start` on a host (each of which the sandbox itself tries twice)."""
RESTART_AFTER = 1.0
"""Seconds before a process that exited by itself is started again."""
"""How long a `pai serve` process may take to answer HTTP after its start."""


class ClusterError(RuntimeError):
    """A part of the cluster did not start (what it printed says why)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str) -> bool:
    try:
        httpx.get(f"{url}/api/v2/info", timeout=2)
    except httpx.HTTPError:
        return False
    return True


class Service:
    """One `pai serve` process, kept running as systemd's `Restart=always` would: when it exits
    by itself (a controller that lost its lease, an API worker that found no store at its
    start) it is started again within `RESTART_AFTER`. `kill()` is a crash that stays down
    until `start()`."""

    def __init__(self, name: str, arguments: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._arguments = [*arguments, "--port", str(self.port)]
        self._env = env
        self._output = logs / f"{name}.out"
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        """Starts after it exited by itself."""
        self._wanted = False
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            self._wanted = True
            self._spawn()
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, daemon=True)
                self._watcher.start()

    def _spawn(self) -> None:
        pai = Path(sys.executable).with_name("pai")
        command = [str(pai)] if pai.exists() else [sys.executable, "-m", "pai.cli.main"]
        with open(self._output, "ab") as output:
            self.process = subprocess.Popen(
                [*command, "serve", *self._arguments],
                env=self._env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _watch(self) -> None:
        """Until the service is killed (a fault, or the cluster's close): then the watcher ends,
        and `start()` makes a new one."""
        while True:
            time.sleep(RESTART_AFTER)
            with self._lock:
                if not self._wanted:
                    self._watcher = None
                    return
                if not self.running():
                    self.restarts += 1
                    self._spawn()

    def wait_answering(self, timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not answers(self.url):
            if time.monotonic() > deadline:
                tail = self._output.read_text(errors="replace")[-2000:]
                raise ClusterError(f"{self.name} did not answer within {timeout:g} s: {tail}")
            time.sleep(0.2)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would; it stays down until `start()`."""
        with self._lock:
            self._wanted = False
            if self.process is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class ChaosCluster:
    """See the module docstring; `start()` builds it, `close()` takes everything down."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sandbox = RaySandbox(
            root / "ray", [WorkerSpec(name, cpus=4, gpus=GPUS_PER_HOST) for name in WORKERS]
        )
        self.postgres = PostgresCluster(root / "pg")
        self.home = root / "home"
        self.node_dir = root / "nodes"
        self.runs = root / "runs"
        self.logs = root / "logs"
        self.controllers: list[Service] = []
        self.api_workers: list[Service] = []
        self._mounted: list[Path] = []

    def start(self) -> None:
        self.root.chmod(0o755)  # the postgres user reaches its cluster's directory through it
        for directory in (self.home, self.runs, self.logs):
            directory.mkdir(parents=True, exist_ok=True)
        self.runs.chmod(0o777)
        self.sandbox.start()
        self.postgres.start()
        env = self._env()
        cluster_file = self._write_cluster_file()
        ray = ["--engine", "ray", "--ray-address", self.sandbox.address]
        for name in ("controller-a", "controller-b"):
            self.controllers.append(
                Service(name, ["controller", "--cluster", str(cluster_file), *ray], env, self.logs)
            )
        self.controllers[0].start()
        self.controllers[0].wait_answering()
        self.controllers[1].start()  # the standby: it answers only once it acts
        for name in ("api-1", "api-2"):
            worker = Service(name, ["api"], env, self.logs)
            worker.start()
            self.api_workers.append(worker)
        for worker in self.api_workers:
            worker.wait_answering()

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.sandbox.env,
            "PAI_HOME": str(self.home),
            "PAI_DATABASE_URL": self.postgres.url,
            "PAI_SECRET_KEY": secrets.token_hex(32),
            "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "PAI_RAY_NODE_DIR": str(self.node_dir),
            "PAI_RAY_NODE_TIMEOUT": f"{NODE_TIMEOUT:g}",
            "PAI_CONTROLLER_LEASE_SECONDS": f"{LEASE_SECONDS:g}",
            "PAI_DISK_FLOOR": DISK_FLOOR,
            "PAI_ISOLATION": "host",
            "PAI_TASK_USER": "root",
            # As after `source .venv/bin/activate`: the processes find this environment's tools.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def _write_cluster_file(self) -> Path:
        nodes = "\n".join(
            f"  - {{cellType: NODE, cellAddress: {name}, "
            f"nodeAddress: {self.sandbox.worker_address(name)}}}"
            for name in WORKERS
        )
        path = self.root / "cluster.yaml"
        path.write_text(
            "physicalCluster:\n"
            "  skuTypes: {FAKE-GPU: {gpu: 1, cpu: 1, memory: 256Mi}}\n"
            f"  cellTypes: {{NODE: {{childCellType: FAKE-GPU, childCellNumber: {GPUS_PER_HOST},"
            " isNodeLevel: true}}\n"
            f"  physicalCells:\n{nodes}\n"
            "virtualClusters:\n"
            f"  default: {{virtualCells: [{{cellType: NODE, cellNumber: {len(WORKERS)}}}]}}\n"
        )
        return path

    def mount_host_disks(self) -> None:
        """Give each host a disk of its own for its tasks' directories: a tmpfs over the (still
        empty) directory where its agent keeps them. On one machine the hosts otherwise share
        one disk, and filling it would fill every host's, and this machine's, at once."""
        for host in WORKERS:
            jobs = self.host_disk(host)
            jobs.mkdir(parents=True, exist_ok=True)
            mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(jobs)]
            subprocess.run(mount, check=True, capture_output=True)
            self._mounted.append(jobs)

    def host_disk(self, host: str) -> Path:
        """Where `host`'s agent keeps its tasks' directories (`<node dir>/<store>/<host>/jobs`)."""
        [store] = list(self.node_dir.iterdir())
        return store / host / "jobs"

    def host_processes(self, host: str, word: str) -> list[psutil.Process]:
        """The processes on `host` whose command line has `word`."""
        listed = subprocess.run(
            ["ip", "netns", "pids", self.sandbox.namespace(host)],
            capture_output=True,
            text=True,
            check=False,
        )
        found = []
        for pid in listed.stdout.split():
            try:
                process = psutil.Process(int(pid))
                if word in " ".join(process.cmdline()):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    def ensure_ray(self, host: str) -> bool:
        """Start Ray on `host` again unless its raylet runs; whether it had to."""
        if self.host_processes(host, "raylet"):
            return False
        self.restart_ray(host)
        return True

    def restart_ray(self, host: str) -> None:
        """Kill what runs on `host` and start Ray there again, as when the machine is rebooted
        (the operator's answer to a host Ray declared dead); a start that misses Ray's deadline
        on a busy machine is tried again."""
        for _ in range(RAY_STARTS - 1):
            self.sandbox.stop_worker(host)
            with contextlib.suppress(SandboxError):
                self.sandbox.start_worker(host)
                return
        self.sandbox.stop_worker(host)
        self.sandbox.start_worker(host)

    def acting_controller(self) -> Service | None:
        """The controller that acts: a standby does not listen."""
        return next((c for c in self.controllers if c.running() and answers(c.url)), None)

    def host_address(self, name: str) -> str:
        return self.sandbox.worker_address(name)

    def close(self) -> None:
        """Take everything down; each step is taken even when one before it failed (the first
        failure is raised at the end), so that an interrupted run leaves nothing running."""
        steps: list[Callable[[], object]] = [
            *(service.kill for service in [*self.api_workers, *self.controllers]),
            self.sandbox.close,
            self.postgres.stop,
            lambda: kill_processes_under(self.root),
            *(
                lambda mounted=mounted: subprocess.run(
                    ["umount", "--lazy", str(mounted)], check=False, capture_output=True
                )
                for mounted in self._mounted
            ),
        ]
        failures = []
        for step in steps:
            try:
                step()
            except Exception as failure:  # each step must be tried
                failures.append(failure)
        if failures:
            raise failures[0]
