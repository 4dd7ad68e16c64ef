"""Room kept free on a disk for PAI's store: a floor under which nothing else may write.

Task logs, uploads and tasks' working directories share a disk with the store (SQLite, under
`$PAI_HOME`) and the server's log. When that disk fills, the store can no longer record what
happens, so the rest stops short of it: under the floor, log writers stop writing (their logs
say they were cut) and uploads are refused (507); a node starts new tasks only while it has at
least twice the floor free (tasks write logs and files), else it says it is out of disk space.
The floor (`PAI_DISK_FLOOR`) is a size, a share of the disk, or by default the smaller of 5 %
and 1 GiB.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3
DEFAULT_SHARE = 0.05
DEFAULT_BYTES = GIB
MIN_BUDGET = 64 * 1024
"""Bytes a writer may write between two looks at the disk, however close it is to the floor."""
_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}
_BINARY = {"ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$", re.IGNORECASE)


class DiskFloorError(ValueError):
    """A floor that cannot be read; the message shows how to write one."""


@dataclass(frozen=True)
class DiskFloor:
    """The free space to keep: the smaller of `share` of the disk and `size` bytes (each
    None when not given; both None keeps nothing free)."""

    share: float | None = DEFAULT_SHARE
    size: int | None = DEFAULT_BYTES

    @classmethod
    def parse(cls, text: str) -> DiskFloor:
        """`5%`, `1GiB`, `500MB`, `0` (no floor)."""
        value = text.strip()
        if value.endswith("%"):
            try:
                share = float(value[:-1]) / 100
            except ValueError:
                share = -1.0
            if not 0 <= share < 1:
                raise DiskFloorError(f"PAI_DISK_FLOOR: {text!r} is not a share between 0% and 100%")
            return cls(share=share, size=None)
        match = _SIZE.match(value)
        if match is None:
            raise DiskFloorError(
                f"PAI_DISK_FLOOR: {text!r} is neither a size (1GiB, 500MB) nor a share (5%)"
            )
        unit = (match[2] or "").lower()
        factor = _BINARY.get(unit) or _UNITS[unit.rstrip("i")]
        return cls(share=None, size=int(float(match[1]) * factor))

    def bytes_on(self, total: int) -> int:
        """The floor on a disk of `total` bytes."""
        floors = [
            *([int(self.share * total)] if self.share is not None else []),
            *([self.size] if self.size is not None else []),
        ]
        return min(floors) if floors else 0

    def to_dict(self) -> dict[str, float | int | None]:
        return {"share": self.share, "size": self.size}


@dataclass(frozen=True)
class Room:
    """The room on the disk of a path, against the floor."""

    path: Path
    free: int
    total: int
    floor: int

    @property
    def short(self) -> bool:
        """Under the floor: nothing but the store may write."""
        return self.free < self.floor

    @property
    def low(self) -> bool:
        """Under twice the floor: no new task may start (it would write soon)."""
        return self.free < 2 * self.floor

    def describe(self) -> str:
        return (
            f"{_size(self.free)} free of {_size(self.total)} on the disk of {self.path}, "
            f"where {_size(self.floor)} are kept for PAI's store"
        )

    def shortage(self) -> str:
        """Why nothing more may be written, or started, there."""
        return (
            f"out of disk space: {_size(self.free)} free on the disk of {self.path}, where "
            f"{_size(self.floor)} are kept for PAI's store (PAI_DISK_FLOOR) and tasks start "
            f"only with twice that free"
        )


def room(path: Path, floor: DiskFloor) -> Room:
    """The room on the disk of `path` (its nearest existing folder)."""
    existing = next(folder for folder in (path, *path.parents) if folder.exists())
    stats = os.statvfs(existing)
    total = stats.f_blocks * stats.f_frsize
    return Room(path, stats.f_bavail * stats.f_frsize, total, floor.bytes_on(total))


class RoomWatch:
    """Whether a disk is above its floor, for a writer that asks before every write: the disk
    is looked at again every `interval` seconds, and sooner once the writer has written half of
    the room that was left above the floor (a task can print a gigabyte in a second)."""

    def __init__(self, path: Path, floor: DiskFloor, interval: float = 0.5) -> None:
        self._path = path
        self._floor = floor
        self._interval = interval
        self._next = 0.0
        self._written = 0
        self._budget = 0
        self._room: Room | None = None

    def current(self, writing: int = 0) -> Room:
        """The room, before writing `writing` bytes."""
        now = time.monotonic()
        self._written += writing
        if self._room is None or now >= self._next or self._written >= self._budget:
            self._room = room(self._path, self._floor)
            self._next = now + self._interval
            self._written = writing
            self._budget = max(MIN_BUDGET, (self._room.free - self._room.floor) // 2)
        return self._room


def _size(amount: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if amount >= factor:
            return f"{amount / factor:.1f} {unit}"
    return f"{amount} B"
