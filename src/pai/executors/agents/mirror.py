"""The control plane's copies of the logs of tasks that run on other machines.

Every stream of every task attempt is copied here as its node's agent reports it (a fraction of
a second behind), capped as the node's own log is, so the API, the CLI and the portal read logs
from here, while the task runs and after it ended, also once its node is gone. A copy is marked
complete when the task has ended and all its output has arrived: followers stop there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pai.executors.base import LogStream, UnknownTaskError, check_task_key
from pai.executors.node.logfiles import CappedLogWriter, follow_log, previous_segment, read_log

COMPLETE_FILE = ".complete"


class LogMirror:
    """Copies under `root/<task key>/<stream>`, each kept to `cap_bytes` like the original."""

    def __init__(self, root: Path, cap_bytes: int) -> None:
        self._root = root
        self._cap_bytes = cap_bytes
        root.mkdir(parents=True, exist_ok=True)

    def start(self, key: str) -> None:
        """Expect the output of attempt `key` (it is known from now on, even before any)."""
        self._directory(key).mkdir(exist_ok=True)

    def knows(self, key: str) -> bool:
        return self._directory(key).is_dir()

    def append(self, key: str, stream: LogStream, data: bytes) -> None:
        writer = CappedLogWriter(self._path(key, stream), self._cap_bytes)
        try:
            writer.write(data)
        finally:
            writer.close()

    def complete(self, key: str) -> None:
        self.start(key)
        self._directory(key).joinpath(COMPLETE_FILE).touch()

    def is_complete(self, key: str) -> bool:
        return self._directory(key).joinpath(COMPLETE_FILE).exists()

    def incomplete(self) -> list[str]:
        """The attempts whose output may still be coming."""
        return sorted(
            directory.name
            for directory in self._root.iterdir()
            if not directory.joinpath(COMPLETE_FILE).exists()
        )

    def resume_points(self, key: str) -> dict[str, int | None]:
        """Where each stream's copy ends, in bytes into the current segment of the original:
        its size, unless the copy has rotated (None: the point cannot be known)."""
        points: dict[str, int | None] = {}
        for stream in LogStream:
            path = self._path(key, stream)
            if previous_segment(path).exists():
                points[stream.value] = None
            elif path.exists():
                points[stream.value] = path.stat().st_size
        return points

    def read(self, key: str, stream: LogStream, tail: int | None) -> bytes:
        return read_log(self._known_path(key, stream), tail)

    def follow(
        self, key: str, stream: LogStream, tail: int | None, poll_interval: float
    ) -> Iterator[bytes]:
        return follow_log(
            self._known_path(key, stream),
            lambda: self.is_complete(key),
            tail=tail,
            poll_interval=poll_interval,
        )

    def _known_path(self, key: str, stream: LogStream) -> Path:
        if not self.knows(key):
            raise UnknownTaskError(f"no task attempt {key!r} was launched here")
        return self._path(key, stream)

    def _directory(self, key: str) -> Path:
        return self._root / check_task_key(key)

    def _path(self, key: str, stream: LogStream) -> Path:
        return self._directory(key) / stream.value
