"""The tasks' output on one stream, each line saying which task printed it.

Every task attempt's log (stdout and stderr as the node interleaves them) is followed by a thread
of its own, and each whole line is written under one lock with its task's prefix (`[srv/0] `),
coloured per task on a terminal, so lines of different tasks never mix mid-line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

COLOURS = (36, 33, 35, 32, 34, 91, 96, 93, 95, 92)
"""ANSI foreground colours, one per task in turn (cyan, yellow, magenta, green, ...)."""


class Relay:
    """Writes tasks' lines to `out` and PAI's own notes to `notes`, coloured when `colour`."""

    def __init__(
        self, out: BinaryIO, notes: BinaryIO, *, colour: bool, prefixed: bool = True
    ) -> None:
        """`prefixed=False` writes the tasks' output as it is (a shell's)."""
        self._out = out
        self._notes = notes
        self._colour = colour
        self._prefixed = prefixed
        self._lock = threading.Lock()
        self._prefixes: dict[str, bytes] = {}
        self._threads: list[threading.Thread] = []

    def follow(self, label: str, chunks: Callable[[], Iterator[bytes]]) -> None:
        """Copy the output `chunks()` yields (until the task has ended), line by line."""
        thread = threading.Thread(
            target=self._copy, args=(label, chunks), name=f"relay {label}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def note(self, label: str | None, message: str) -> None:
        """PAI's own line about a task (or the run, when `label` is None)."""
        prefix = self._prefix(label) if label else b""
        with self._lock:
            self._out.flush()
            self._notes.write(prefix + f"pai run: {message}\n".encode())
            self._notes.flush()

    def wait(self, timeout: float = 10.0) -> None:
        """Until every followed log is copied to its end."""
        for thread in self._threads:
            thread.join(timeout)

    def _copy(self, label: str, chunks: Callable[[], Iterator[bytes]]) -> None:
        pending = b""
        for chunk in chunks():
            if not self._prefixed:
                self._write(chunk)
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                prefix = self._prefix(label)
                self._write(b"".join(prefix + line + b"\n" for line in lines))
        if pending:
            self._write((self._prefix(label) if self._prefixed else b"") + pending + b"\n")

    def _write(self, data: bytes) -> None:
        with self._lock:
            self._out.write(data)
            self._out.flush()

    def _prefix(self, label: str) -> bytes:
        with self._lock:
            prefix = self._prefixes.get(label)
            if prefix is None:
                text = f"[{label}]"
                if self._colour:
                    colour = COLOURS[len(self._prefixes) % len(COLOURS)]
                    text = f"\x1b[{colour}m{text}\x1b[0m"
                prefix = self._prefixes[label] = f"{text} ".encode()
            return prefix
