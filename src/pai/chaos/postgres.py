"""A PostgreSQL cluster of one's own, that a test or a chaos run can stop and start.

It runs Debian's `initdb` and `pg_ctl` as the `postgres` user (so it needs root), on a free port
of 127.0.0.1, with trust authentication and fsync off: a store to take away, not to keep.
"""

from __future__ import annotations

import glob
import shutil
import socket
import subprocess
import time
from pathlib import Path


class PostgresError(RuntimeError):
    """A PostgreSQL tool failed (its output says why)."""


def server_installed() -> bool:
    return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


class PostgresCluster:
    """A PostgreSQL cluster in `directory`: `start()` creates and starts it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.directory, "postgres")
        self._as_postgres("initdb", "--auth=trust", "--username=postgres", "-D", str(self.data))
        self.resume()

    def pause(self) -> None:
        """Stop the server (fast: open sessions are ended), keeping its data."""
        self._pg_ctl("stop", "-m", "fast")

    def resume(self) -> None:
        """Start the server (again) on its port."""
        self._pg_ctl("start")

    def restart(self, outage: float) -> None:
        """Stop the server, and start it again `outage` seconds later."""
        self.pause()
        time.sleep(outage)
        self.resume()

    def stop(self) -> None:
        if self.data.exists():
            self._pg_ctl("stop", "-m", "immediate", check=False)

    def _pg_ctl(self, action: str, *options: str, check: bool = True) -> None:
        server_options = f"-p {self.port} -k {self.directory} -h 127.0.0.1 -c fsync=off"
        self._as_postgres(
            "pg_ctl", action, "-w", "-D", str(self.data), "-o", server_options,
            "-l", str(self.directory / "postgres.log"), *options, check=check,
        )  # fmt: skip

    def _as_postgres(self, tool: str, *arguments: str, check: bool = True) -> None:
        done = subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin / tool), *arguments],
            capture_output=True,
            text=True,
            cwd=self.directory,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise PostgresError(f"{tool} {arguments[0]}: {done.stdout}{done.stderr}")
