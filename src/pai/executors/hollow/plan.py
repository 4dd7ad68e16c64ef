"""What a task does on a hollow node, read from its commands: how long, and how it ends.

A hollow node runs nothing. A task lasts as many seconds as the first `sleep N` among its
commands says (`N` in seconds, or with a suffix `s`, `m`, `h` or `d`, or `infinity`), forever
when there is none, and then ends with the code of a trailing `exit N` (0 without one). So the
jobs one writes for a real cluster (`sleep 3600; exit 1`) behave alike on hollow nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pai.runtime.plugins import role_commands

UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+(infinity|\d+(?:\.\d*)?|\.\d+)([smhd]?)(?=$|[\s;&|)])")
TRAILING_EXIT = re.compile(r"(?:^|[\s;&|(])exit\s+(\d+)\s*;?\s*$")


@dataclass(frozen=True)
class TaskPlan:
    seconds: float | None
    """How long the task runs (None: until it is stopped)."""
    exit_code: int
    """The process status it ends with (0-255)."""

    def describe(self) -> str:
        length = "until stopped" if self.seconds is None else f"for {self.seconds:g} s"
        return f"runs {length}, then exits with {self.exit_code}"


def plan_of(script: str) -> TaskPlan:
    """The plan of a task whose script (as `build_task_script` makes it) is `script`."""
    commands = role_commands(script)
    seconds: float | None = None
    sleep = SLEEP.search(commands)
    if sleep is not None and sleep.group(1) != "infinity":
        seconds = float(sleep.group(1)) * UNITS[sleep.group(2)]
    ending = TRAILING_EXIT.search(commands.rstrip())
    code = int(ending.group(1)) % 256 if ending is not None else 0
    return TaskPlan(seconds, code)
