"""Task log files with a size cap that keeps the tail, and reading them: tail and follow.

A stream is kept as two segments, `<name>` (being written) and `<name>.1` (the one before), each
at most half the cap. When `<name>` is full it is renamed to `<name>.1`, replacing the older one,
and a fresh `<name>` begins. So at most `cap` bytes stay on disk, the newest at least `cap / 2`
of them are always there, and a reader following `<name>` notices the rename by its inode and
loses nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from pai.diskfloor import RoomWatch

READ_CHUNK = 64 * 1024


def previous_segment(path: Path) -> Path:
    return path.with_name(path.name + ".1")


class CappedLogWriter:
    """Appends to a stream from any thread, rotating segments to keep at most `cap_bytes`.

    With a `room` watch, it writes only while the disk is above PAI's floor
    (`pai.diskfloor`): under it, the log says it is cut, output is dropped (and counted), and
    writing goes on with a note once there is room again."""

    def __init__(self, path: Path, cap_bytes: int, room: RoomWatch | None = None) -> None:
        self._path = path
        self._segment_bytes = max(1, cap_bytes // 2)
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._room = room
        self._dropped: int | None = None  # bytes dropped since the log was cut; None: not cut

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._cut(len(data)):
                return
            try:
                self._append(data)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                self._dropped = len(data)  # the disk filled before the watch saw it

    @property
    def cut(self) -> bool:
        """Whether output is being dropped for lack of room."""
        return self._dropped is not None

    def _cut(self, size: int) -> bool:
        """Whether to drop `size` bytes: the disk is under its floor (the log then says so
        once), or was and the log now says how much was lost."""
        if self._room is None:
            return False
        room = self._room.current(size)
        if room.short:
            if self._dropped is None:
                self._dropped = 0
                self._note(f"\n[pai] this log is cut here: the node is {room.shortage()}\n")
            self._dropped += size
            return True
        if self._dropped is not None:
            dropped, self._dropped = self._dropped, None
            self._note(f"[pai] the log goes on: {dropped} bytes of output were lost meanwhile\n")
        return False

    def _note(self, text: str) -> None:
        with contextlib.suppress(OSError):  # not even room for the note
            self._append(text.encode())

    def _append(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._size >= self._segment_bytes:
                self._rotate()
            room = self._segment_bytes - self._size
            written = os.write(self._fd, view[:room])
            self._size += written
            view = view[written:]

    def close(self) -> None:
        with self._lock:
            os.close(self._fd)

    def _rotate(self) -> None:
        os.close(self._fd)
        os.replace(self._path, previous_segment(self._path))
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = 0


def read_log(path: Path, tail: int | None = None) -> bytes:
    """The retained content of a stream (both segments), or its last `tail` bytes."""
    for _ in range(3):
        try:
            with open(path, "rb") as current:
                retained = _retained(path, current, os.fstat(current.fileno()).st_size, tail)
        except FileNotFoundError:
            retained = _retained(path, None, 0, tail)
        if retained is not None:
            return retained
    return b""


class LogReader:
    """Reads a stream as it is written, without blocking: each `read` returns what was written
    since the last one (possibly nothing), following the writer across rotations.

    It starts `start` bytes into the segment being written when it is first found (or at its
    end, with `start=None`). The stream need not exist yet.
    """

    def __init__(self, path: Path, *, start: int | None = 0) -> None:
        self._path = path
        self._start = start
        self._current: BinaryIO | None = None

    @property
    def path(self) -> Path:
        return self._path

    def open(self) -> BinaryIO | None:
        """The segment being read, opened at the start position on the first call that finds
        the stream; None while the stream does not exist."""
        if self._current is None:
            try:
                self._current = open(self._path, "rb")  # noqa: SIM115 - closed in close()
            except FileNotFoundError:
                return None
            size = os.fstat(self._current.fileno()).st_size
            self._current.seek(size if self._start is None else min(self._start, size))
        return self._current

    def read(self, limit: int = READ_CHUNK) -> bytes:
        current = self.open()
        while current is not None:
            data = current.read(limit)
            if data or not _was_rotated(self._path, current):
                return data
            current = self._current = _next_segment(self._path, current)
        return b""

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None


def follow_log(
    path: Path,
    finished: Callable[[], bool],
    *,
    tail: int | None = 0,
    poll_interval: float = 0.2,
) -> Iterator[bytes]:
    """Yield the stream's data as it is written, starting `tail` bytes back (None: everything
    retained), until `finished()` is true and all data is read.

    `finished` must only turn true once the writer has closed the stream.
    """
    reader = LogReader(path, start=None)
    try:
        while True:
            done = finished()  # decided before looking, so a stream written meanwhile is read
            current = reader.open()
            if current is not None:
                break
            if done:
                return
            time.sleep(poll_interval)
        if tail != 0:
            head = _retained(path, current, current.tell(), tail)
            if head:
                yield head
        while True:
            done = finished()  # decided before reading, so what was written before is read below
            data = reader.read()
            if data:
                yield data
            elif done:
                return
            else:
                time.sleep(poll_interval)
    finally:
        reader.close()


def _retained(path: Path, current: BinaryIO | None, size: int, tail: int | None) -> bytes | None:
    """The last `tail` bytes (None: all) of the previous segment followed by `current[:size]`;
    None when a rotation between opening `current` and the previous segment mixed them up."""
    take_current = size if tail is None else min(size, tail)
    from_current = os.pread(current.fileno(), take_current, size - take_current) if current else b""
    want_previous = None if tail is None else tail - take_current
    if want_previous == 0:
        return from_current
    try:
        previous = open(previous_segment(path), "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return from_current
    with previous:
        previous_stat = os.fstat(previous.fileno())
        if current and previous_stat.st_ino == os.fstat(current.fileno()).st_ino:
            return None
        start = 0 if want_previous is None else max(0, previous_stat.st_size - want_previous)
        previous.seek(start)
        return previous.read() + from_current


def _next_segment(path: Path, finished_segment: BinaryIO) -> BinaryIO:
    """The segment written after `finished_segment`: the previous-segment file when a second
    rotation already moved a newer segment there, else the current file."""
    inode = os.fstat(finished_segment.fileno()).st_ino
    finished_segment.close()
    try:
        previous = open(previous_segment(path), "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        return _open_current(path)
    if os.fstat(previous.fileno()).st_ino != inode:
        return previous
    previous.close()
    return _open_current(path)


def _open_current(path: Path) -> BinaryIO:
    """Open the segment being written, waiting out the instant between a rotation's rename and
    the writer's new file."""
    for _ in range(100):
        try:
            return open(path, "rb")
        except FileNotFoundError:
            time.sleep(0.01)
    return open(path, "rb")


def _was_rotated(path: Path, current: BinaryIO) -> bool:
    try:
        return os.stat(path).st_ino != os.fstat(current.fileno()).st_ino
    except FileNotFoundError:
        return False  # between the writer's rename and its new file
