"""Containers through the node's runtime (podman): the command that starts a task's container,
and what is asked of the runtime about it afterwards.

A task's container runs on the host's network (as OpenPAI's did, so that `PAI_*` addresses and
ports mean the same inside and out), with the job's limits (memory, CPU, shared memory, process
count), only the devices the scheduler chose, and no host path but the task's working directory,
its previous attempt's (read-only) and its storages, each at the path it has on the node.
Everything else (the OCI runtime, cgroup manager, ulimits, registries, capabilities) is the
runtime's own configuration, as the node's administrator set it.

The container's first process is a small shell (`BOOT`) that needs nothing but `/bin/sh` in the
image. It gets four descriptors from the supervisor (podman's `--preserve-fds`): the script to
run (3), a pipe on which it says it started (4), and the task's stdout and stderr pipes (5, 6),
onto which it moves its own output; podman's output goes to the runtime log instead, so the
task's logs hold only what the task printed. It runs the script with bash when the image has
bash (else with sh) as its child, passes SIGTERM on, and exits with the script's status; when
the task is being stopped, only once every other process of the container has ended too (the
end of the first process ends them all), or the grace period is over.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pai.cluster.cdispecs import declared_devices
from pai.cluster.devices import DEFAULT_DEVICE_KIND, device_name
from pai.executors.isolation.mounts import Mount
from pai.executors.node.taskfiles import Exited
from pai.runtime.devices import visible_indices_in_container

SCRIPT_FD, STARTED_FD, STDOUT_FD, STDERR_FD = 3, 4, 5, 6
PRESERVED_FDS = 4
CONTAINER_PREFIX = "pai"
RUNTIME_TIMEOUT = 120.0
"""The longest a runtime command may take before the task's start counts as failed."""
BOOT = f"""printf 1 >&{STARTED_FD}; exec {STARTED_FD}>&-
exec 1>&{STDOUT_FD} 2>&{STDERR_FD} {STDOUT_FD}>&- {STDERR_FD}>&-
trap 'pai_stopping=1; kill -TERM "$pai_task" 2>/dev/null' TERM INT
if command -v bash >/dev/null 2>&1; then bash /dev/fd/{SCRIPT_FD} & else sh /dev/fd/{SCRIPT_FD} & fi
pai_task=$!
exec {SCRIPT_FD}<&-
while :; do
  wait "$pai_task"; pai_status=$?
  kill -0 "$pai_task" 2>/dev/null || break
done
if [ -n "$pai_stopping" ]; then
  while kill -0 -1 2>/dev/null; do sleep 0.1; done
fi
exit "$pai_status"
"""
NVIDIA_CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
CAP_SYS_RESOURCE = 24
UNLIMITED_MEMLOCK = "--ulimit=memlock=-1:-1"
_NAME_ALPHABET = re.compile(r"[^A-Za-z0-9_.-]")


class ContainerError(Exception):
    """The runtime refused or failed a request; the message has its own words."""


@dataclass(frozen=True)
class ContainerLimits:
    """What the job asked of each task, as the container's limits."""

    memory_mb: int | None = None
    cpus: float | None = None
    shm_mb: int | None = None
    pids: int | None = None


def container_name(executor_id: str, key: str) -> str:
    """The container of task attempt `key` of one executor: several PAI installations (or
    test runs) may share a node's runtime, so the executor's id is part of the name."""
    return f"{CONTAINER_PREFIX}-{executor_id}-{_NAME_ALPHABET.sub('_', key)}"


def run_command(
    runtime: str,
    *,
    name: str,
    image: str,
    labels: Mapping[str, str],
    env_file: Path,
    working_dir: Path,
    binds: Sequence[Mount],
    limits: ContainerLimits,
    device_arguments: Sequence[str],
    pidfile: Path,
    conmon_pidfile: Path,
) -> list[str]:
    """`podman run` of a task's container, detached once its first process runs."""
    command = [
        runtime,
        "run",
        "--detach",
        "--name",
        name,
        "--network",
        "host",
        "--log-driver",
        "passthrough",
        "--pull",
        "never",
        "--preserve-fds",
        str(PRESERVED_FDS),
        "--pidfile",
        str(pidfile),
        "--conmon-pidfile",
        str(conmon_pidfile),
        "--env-file",
        str(env_file),
        "--workdir",
        str(working_dir),
    ]
    for key, value in sorted(labels.items()):
        command += ["--label", f"{key}={value}"]
    for bind in binds:
        command += ["--mount", bind_option(bind)]
    if limits.memory_mb:
        # No swap beyond the limit: a task that outgrows it is killed, as OpenPAI's were.
        command += ["--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m"]
    if limits.cpus:
        command += ["--cpus", f"{limits.cpus:g}"]
    if limits.shm_mb:
        command += ["--shm-size", f"{limits.shm_mb}m"]
    if limits.pids:
        command += ["--pids-limit", str(limits.pids)]
    command += [*device_arguments, "--entrypoint", "/bin/sh", image, "-c", BOOT]
    return command


def bind_option(bind: Mount) -> str:
    """`--mount` of a host directory; a path the option cannot carry is refused."""
    for path in (bind.source, bind.target):
        if "," in path or "\n" in path or not path.startswith("/"):
            raise ContainerError(
                f"{path!r} cannot be mounted into a container: mount paths must be absolute "
                "and hold no comma"
            )
    option = f"type=bind,source={bind.source},destination={bind.target}"
    return option + (",ro=true" if bind.read_only else "")


def device_arguments(
    kind: str,
    devices: Sequence[int],
    *,
    cdi_dirs: Sequence[Path] | None = None,
    dev: Path = Path("/dev"),
) -> tuple[list[str], dict[str, str]]:
    """The runtime arguments that give a container the node's devices `devices` of `kind`,
    and the variables its task sees differently inside (its vendor's library numbers them
    from 0 there: `pai.runtime.devices`).

    Where the node's CDI specs declare these devices, each is asked for by its CDI name
    (`KIND=INDEX`), which brings whatever the spec lists (device nodes, libraries, variables);
    nothing else is needed for a kind PAI has no code for. Without one, NVIDIA GPUs' device
    nodes are passed (an image then needs the driver's user-space libraries, or the NVIDIA
    container toolkit's hook adds them, reading `NVIDIA_VISIBLE_DEVICES`). Otherwise (devices
    declared to the cluster but absent, as in tests), only the variables."""
    if not devices:
        return [], {}
    env = visible_indices_in_container(kind, len(devices))
    names = [device_name(kind, device) for device in devices]
    if set(names) <= declared_devices(cdi_dirs):
        return [f"--device={name}" for name in names], env
    if kind != DEFAULT_DEVICE_KIND:
        return [], env
    nodes = [dev / f"nvidia{gpu}" for gpu in devices]
    if all(node.exists() for node in nodes):
        controls = [dev / name for name in NVIDIA_CONTROL_DEVICES]
        present = [node for node in (*nodes, *controls) if node.exists()]
        return [f"--device={node}" for node in present], env
    return [], env


def rdma_arguments(dev: Path = Path("/dev")) -> list[str]:
    """The runtime arguments that give a container the node's RDMA devices (InfiniBand or
    RoCE verbs, the connection manager: everything under `/dev/infiniband`) and no limit on
    locked memory, in which NCCL and other verbs users register their buffers. Only a PAI
    that may raise limits (CAP_SYS_RESOURCE, as root on a server) asks for that; otherwise
    the container keeps the limit the node's runtime gives (`default_ulimits` in its
    `containers.conf`), as asking for more would fail the container's start."""
    folder = dev / "infiniband"
    devices = (
        [f"--device={device}" for device in sorted(folder.iterdir())] if folder.is_dir() else []
    )
    return [*devices, *([UNLIMITED_MEMLOCK] if may_raise_limits() else [])]


def may_raise_limits() -> bool:
    """Whether this process has CAP_SYS_RESOURCE in its effective set."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    found = re.search(r"^CapEff:\s*([0-9a-f]+)$", status, re.M)
    return found is not None and bool(int(found.group(1), 16) >> CAP_SYS_RESOURCE & 1)


def inspect_exit(runtime: str, name: str, env: Mapping[str, str]) -> Exited:
    """How the container's first process ended, as the runtime recorded it."""
    done = _run(
        [runtime, "inspect", "--format", "{{.State.ExitCode}} {{.State.OOMKilled}}", name], env
    )
    status, oom = done.split()
    return Exited(int(status), oom_killed=oom == "true")


def remove(runtime: str, name: str, env: Mapping[str, str]) -> None:
    """Remove the container, ending it first if it still runs; a missing one is no error."""
    _run([runtime, "rm", "--force", "--ignore", "--time", "0", name], env)


def names_labelled(runtime: str, label: str, env: Mapping[str, str]) -> list[str]:
    """The containers (running or not) carrying `label` (`key=value`)."""
    done = _run([runtime, "ps", "--all", "--filter", f"label={label}", "--format", "json"], env)
    return [str(entry["Names"][0]) for entry in json.loads(done or "[]")]


def _run(command: list[str], env: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=RUNTIME_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ContainerError(f"{Path(command[0]).name} {command[1]}: {error}") from None
    if done.returncode != 0:
        said = done.stderr.strip().removeprefix("Error: ") or f"exit status {done.returncode}"
        raise ContainerError(f"{Path(command[0]).name} {command[1]}: {said}")
    return done.stdout.strip()
