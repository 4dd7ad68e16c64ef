"""`pai run --shell`: a shell in place of a task's commands, in the task's very environment.

The task is launched as any other (its image, variables, working directory, limits, runtime
plugins), but its commands are replaced by a shell that reads what `pai run` reads: a named pipe
in the task's working directory, which the container or the task's view of the host sees at the
same path, carries `pai run`'s standard input to it. Its output is the task's log, copied as it
comes. There is no terminal: line by line, as `echo 'ls; exit' | pai run --shell` works too.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from dataclasses import replace
from pathlib import Path

from pai.executors.base import TaskLaunch
from pai.executors.isolation.policy import CONTAINER, TaskUser
from pai.protocol import JobSpec, runtime_plugins_for_role
from pai.runtime.plugins import build_task_script

INPUT_PIPE = ".pai-shell-input"
OPEN_RETRY_SECONDS = 0.05


class ShellInput:
    """Makes each launch a shell's, and feeds `pai run`'s standard input (`source`) to it."""

    def __init__(
        self,
        spec: JobSpec,
        secrets: dict[str, object],
        source: int,
        *,
        interactive: bool,
        task_user: TaskUser | None,
    ) -> None:
        """`source` is a file descriptor; `interactive` shells print prompts; `task_user` owns
        the pipe when host tasks run as another user."""
        self._spec = spec
        self._secrets = secrets
        self._source = source
        self._interactive = interactive
        self._task_user = task_user

    def __call__(self, launch: TaskLaunch) -> TaskLaunch:
        pipe = launch.working_dir / INPUT_PIPE
        launch.working_dir.mkdir(parents=True, exist_ok=True)
        os.mkfifo(pipe)
        in_container = launch.isolation == CONTAINER
        # The image may run as any user; its working directory keeps others out already.
        os.chmod(pipe, 0o666 if in_container else 0o600)
        if self._task_user is not None:
            os.chown(pipe, self._task_user.uid, self._task_user.gid)
        script = build_task_script(
            [shell_command(pipe, interactive=self._interactive)],
            runtime_plugins_for_role(self._spec, launch.role),
            self._secrets,
            in_container=in_container,
        )
        threading.Thread(
            target=feed, args=(pipe, self._source), name="shell input", daemon=True
        ).start()
        return replace(launch, script=script)


def shell_command(pipe: Path, *, interactive: bool) -> str:
    """bash where the image (or host) has it, else sh, reading from `pipe`."""
    flag = " -i" if interactive else ""
    source = shlex.quote(str(pipe))
    return (
        f"if command -v bash >/dev/null 2>&1; then exec bash{flag} <{source}; "
        f"else exec sh{flag} <{source}; fi"
    )


def feed(pipe: Path, source: int) -> None:
    """Copy `source` into `pipe` once the shell opens it, until `source` ends (then the shell
    reads the end of its input and exits) or the shell is gone."""
    while True:
        try:
            target = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            break
        except FileNotFoundError:  # the run is over and its directories are gone
            return
        except OSError:  # no reader yet (ENXIO): the task is still starting
            time.sleep(OPEN_RETRY_SECONDS)
    os.set_blocking(target, True)
    try:
        while chunk := os.read(source, 65536):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError:  # the shell ended first
        pass
    finally:
        os.close(target)
