"""Starts task supervisors by forking them from a warm process, not as new interpreters.

A fresh `python` that imports the supervisor takes 60-80 ms and most of a core; a gang of 32
tasks on a small machine then waits a second or more for its supervisors to boot. The local
executor instead keeps a few launcher processes (`python -m pai.executors.node.launcher TASKS_DIR`)
that have imported the supervisor once and fork a supervisor per task in about a millisecond,
in parallel for the tasks of a gang.

A launcher runs in a session of its own with only the environment tasks inherit, reads
requests on its stdin and answers on its stdout, and exits when its executor goes away (the end
of its stdin: the executor is collected, or its process ends however it ends). Each forked
supervisor starts a session of its own too, with stdin and stdout on /dev/null and stderr
appended to the task's runtime log, so it outlives both the launcher and the platform. The
launcher records a supervisor's identity before the supervisor runs, so a supervisor that dies
at once is noticed, and a detached one (which records its own child in its place) is never
overwritten. Children are reaped by the kernel (SIGCHLD ignored), so none lingers as a zombie.

A request carries the task's script, which holds the job's secrets, and the task's other
secrets (registry credentials, SSH keys): they travel through the pipe and the forked process's
memory only, never through a file or a command line.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import traceback
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pai.executors.node.supervisor import supervise
from pai.executors.node.taskfiles import ProcessIdentity, TaskFiles

_LENGTH = struct.Struct(">I")
LAUNCHER_LOG = "launcher.log"
LAUNCHERS = 4
"""Launcher processes per executor (about 17 MB each): forking 32 supervisors one after another
takes one process several milliseconds each on a busy machine."""


class LauncherError(OSError):
    """The launcher could not start a supervisor (or is gone); the message says why."""


class SupervisorLauncher:
    """The executor's side: a few launcher processes, asked in turn, so that the tasks of a
    gang are forked in parallel. Safe to call from several threads."""

    def __init__(self, tasks_dir: Path, env: Mapping[str, str], processes: int = LAUNCHERS) -> None:
        self._launchers = [_Launcher(tasks_dir, env) for _ in range(processes)]
        self._turn = itertools.count()

    def start(
        self, task_dir: Path, runtime_log: Path, script: str, secrets: Mapping[str, Any]
    ) -> int:
        """Fork the supervisor of the task in `task_dir`; its pid."""
        launcher = self._launchers[next(self._turn) % len(self._launchers)]
        return launcher.start(task_dir, runtime_log, script, secrets)

    def warm(self) -> None:
        """Start the launchers now, so that the first launches do not wait for them."""
        for launcher in self._launchers:
            launcher.warm()


class _Launcher:
    """One launcher process, started on first use (again if it died). The requests that queue
    up while one batch is served go to it together, as the next batch."""

    def __init__(self, tasks_dir: Path, env: Mapping[str, str]) -> None:
        self._tasks_dir = tasks_dir
        self._env = dict(env)
        self._lock = threading.Lock()  # held by the thread that talks to the launcher
        self._queue_lock = threading.Lock()
        self._queue: list[_Request] = []
        self._process: subprocess.Popen[bytes] | None = None

    def start(
        self, task_dir: Path, runtime_log: Path, script: str, secrets: Mapping[str, Any]
    ) -> int:
        request = _Request(
            {
                "task_dir": str(task_dir),
                "runtime_log": str(runtime_log),
                "script": script,
                "secrets": dict(secrets),
            }
        )
        with self._queue_lock:
            self._queue.append(request)
        with self._lock:
            if not request.answered:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._serve(batch)
        return request.pid()

    def warm(self) -> None:
        with self._lock:
            self._running()

    def _serve(self, batch: list[_Request]) -> None:
        """Send the batch, then read its answers; every request is answered, if with an error."""
        why = "it exited"
        process = None
        try:
            process = self._running()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(b"".join(_encode(request.message) for request in batch))
            process.stdin.flush()
            for request in batch:
                reply = _read_message(process.stdout)
                if reply is None:
                    break
                request.answer(reply)
        except OSError as exc:
            why = str(exc)
        unanswered = [request for request in batch if not request.answered]
        if not unanswered:
            return
        if process is not None:
            self._process = None
            process.kill()
            process.wait()
        for request in unanswered:
            request.answer({"error": f"the supervisor launcher failed ({why})"})

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        with open(self._tasks_dir.parent / LAUNCHER_LOG, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "pai.executors.node.launcher", str(self._tasks_dir)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self._tasks_dir,
                env=self._env,
                start_new_session=True,
                close_fds=True,
            )
        # When this object goes, so does the launcher (it reads the end of its requests).
        weakref.finalize(self, _close_requests, self._process)
        return self._process


class _Request:
    def __init__(self, message: dict[str, Any]) -> None:
        self.message = message
        self._reply: dict[str, Any] | None = None

    @property
    def answered(self) -> bool:
        return self._reply is not None

    def answer(self, reply: dict[str, Any]) -> None:
        self._reply = reply

    def pid(self) -> int:
        assert self._reply is not None
        if "error" in self._reply:
            raise LauncherError(str(self._reply["error"]))
        return int(self._reply["pid"])


def _close_requests(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()


def _encode(message: Mapping[str, Any]) -> bytes:
    data = json.dumps(message).encode()
    return _LENGTH.pack(len(data)) + data


def _write_message(stream: IO[bytes], message: Mapping[str, Any]) -> None:
    stream.write(_encode(message))
    stream.flush()


def _read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(header)
    data = stream.read(length)
    if len(data) < length:
        return None
    message: dict[str, Any] = json.loads(data)
    return message


# -- the launcher process -------------------------------------------------------------------------


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Fork a supervisor per request until the requests end."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while (request := _read_message(requests)) is not None:
        try:
            reply: dict[str, Any] = {"pid": _fork_supervisor(request)}
        except OSError as exc:
            reply = {"error": f"cannot start the task's supervisor: {exc}"}
        _write_message(replies, reply)


def _fork_supervisor(request: Mapping[str, Any]) -> int:
    files = TaskFiles(Path(request["task_dir"]))
    runtime_log = os.open(request["runtime_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        go_read, go_write = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:
                os.close(go_write)
                _become_supervisor(
                    files,
                    runtime_log,
                    go_read,
                    request["script"].encode(),
                    request.get("secrets", {}),
                )
        except OSError:
            os.close(go_write)
            raise
        finally:
            os.close(go_read)  # in the launcher: the child never returns here
    finally:
        os.close(runtime_log)
    recorded = False
    try:
        identity = ProcessIdentity.of(pid)
        if identity is not None:
            files.write_supervisor(identity)
            recorded = True
    finally:
        if recorded:
            os.write(go_write, b"1")
        os.close(go_write)  # unrecorded, the child reads the end and exits: none would watch it
    return pid


def _become_supervisor(
    files: TaskFiles, runtime_log: int, go: int, script: bytes, secrets: dict[str, Any]
) -> None:
    """In the forked child: a session and standard streams of its own, then supervise the task
    once the launcher has recorded it. Never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(runtime_log, 2)
        os.close(null)
        os.close(runtime_log)
        os.chdir(files.directory)
        recorded = os.read(go, 1)
        os.close(go)
        if recorded:  # else the launcher could not record us: nobody would watch us
            code = supervise(files, script, secrets)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """TASKS_DIR is not read: it names the executor's home on the command line, where tools
    that end a home's processes by command line find the launcher and what it forked."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pai.executors.node.launcher TASKS_DIR", file=sys.stderr)
        return 2
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
