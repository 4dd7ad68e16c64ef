"""The `pai` command as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from server.harness import RunningServer

COMMAND_TIMEOUT = 120.0


def pai_command() -> list[str]:
    """The `pai` script installed next to this Python, else the module it runs."""
    script = Path(sys.executable).parent / "pai"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pai.cli.main"]


WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
"""A prefix to a command that runs it with SIGINT's default action (exec keeps it)."""


@dataclass(frozen=True)
class Pai:
    """Runs `pai` with `PAI_CONFIG` in the test's directory and no other PAI_* variable."""

    config: Path
    env: dict[str, str]

    def run(
        self, *args: str, input: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*pai_command(), *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=COMMAND_TIMEOUT,
            start_new_session=True,  # no controlling terminal: nothing can prompt on a tty
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        """`pai` running in the background, with Ctrl-C's signal acting as in a terminal even
        when the suite itself was started in the background (which ignores SIGINT, and a
        child inherits that)."""
        return subprocess.Popen(
            [*WITH_DEFAULT_SIGINT, *pai_command(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=True,
        )

    def login(self, server: RunningServer, username: str, password: str) -> None:
        result = self.run(
            "login", "--server", server.base_url, "--username", username, "--password", password
        )
        assert result.returncode == 0, result.stderr


def make_pai(directory: Path) -> Pai:
    """`pai` with its configuration under `directory` (also its HOME) and no other PAI_*
    variable from the environment the tests run in."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_")}
    env.pop("COLUMNS", None)
    config = directory / "client" / "config"
    env.update(PAI_CONFIG=str(config), HOME=str(directory))
    return Pai(config, env)


def single_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one `error: ...` line a failed command printed (failing the test otherwise)."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
