"""Whether this node's container runtime can start a container at all.

A runtime may answer `podman version` and still fail every container: an OCI runtime that
cannot set a resource limit on this machine, a cgroup manager that is not there, storage it
cannot mount. Every task would then fail at its start, as if its job were wrong. Like a kubelet
whose runtime is down, the node checks its runtime with a trivial container (`true`, on a root
file system of the node's own system folders, read-only, so that no image is needed) when it
starts, and again when a task's container fails to start. While the check fails, the node takes
no tasks and says why with the runtime's own words (the node list, `pai cluster`, the portal),
the tasks that met the failure are retried as a platform failure, and the check runs again
every `RECHECK_SECONDS` until the runtime works; then the node takes tasks again.

The verdict lives in a file of the node's state directory, so that a task's supervisor, which
sees a start fail, and the executor, which says whether the node is ready, share it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

RECHECK_SECONDS = 30.0
CHECK_TIMEOUT = 120.0
STATE_FILE = "runtime-check.json"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""What the trivial container sees of the node (read-only): enough to run its `true`."""


def trivial_container_problem(runtime: str, env: Mapping[str, str]) -> str | None:
    """None when `runtime` starts a container that runs `true`; else what it said."""
    with tempfile.TemporaryDirectory(prefix="pai-runtime-check-") as scratch:
        rootfs = Path(scratch)
        volumes = []
        for name in SYSTEM_DIRS:
            system = Path("/") / name
            if system.is_symlink():  # /bin -> usr/bin where /usr is merged
                (rootfs / name).symlink_to(os.readlink(system))
            elif system.is_dir():
                volumes += ["--volume", f"{system}:{system}:ro"]
        command = [runtime, "run", "--rm", "--network", "host", *volumes]
        try:
            done = subprocess.run(
                [*command, "--rootfs", str(rootfs), "true"],
                capture_output=True,
                text=True,
                env=dict(env),
                timeout=CHECK_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"{Path(runtime).name} run: {error}"
    if done.returncode == 0:
        return None
    printable = "".join(char if char.isprintable() or char == "\n" else " " for char in done.stderr)
    lines = [" ".join(line.split()) for line in printable.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]  # not podman's warnings
    said = (errors or lines or [f"exit status {done.returncode}"])[-1]
    return said.removeprefix("Error: ")


class RuntimeHealth:
    """This node's verdict on its runtime (see the module docstring), in `state_dir`."""

    def __init__(
        self,
        runtime: str,
        env: Mapping[str, str],
        state_dir: Path,
        *,
        recheck_seconds: float = RECHECK_SECONDS,
    ) -> None:
        self._runtime = runtime
        self._env = dict(env)
        self._path = state_dir / STATE_FILE
        self._recheck_seconds = recheck_seconds
        self._rechecking = threading.Lock()

    def check(self) -> str | None:
        """Start the trivial container now; record and return what went wrong, if anything."""
        return self.record(trivial_container_problem(self._runtime, self._env))

    def record(self, problem: str | None) -> str | None:
        """Record the verdict of a check (`problem`, None when the container started)."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        partial = self._path.with_name(f".{self._path.name}.{os.getpid()}")
        partial.write_text(json.dumps({"problem": problem, "checked_at": time.time()}))
        partial.replace(self._path)
        return problem

    def problem(self) -> str | None:
        """The last verdict, `None` when the runtime works (or was never found failing); a
        failing one is checked again in the background once it is `recheck_seconds` old."""
        try:
            state = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return None
        problem = state.get("problem")
        if problem is None:
            return None
        due = time.time() - float(state.get("checked_at", 0)) >= self._recheck_seconds
        if due and self._rechecking.acquire(blocking=False):
            threading.Thread(target=self._recheck, name="pai-runtime-check", daemon=True).start()
        return f"the container runtime cannot start a container: {problem}"

    def _recheck(self) -> None:
        try:
            self.check()
        finally:
            self._rechecking.release()
