"""Capped task logs: the tail is always kept, a follower never misses or repeats data, and a
log never takes the room kept for PAI's store."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pai.diskfloor import DiskFloor, RoomWatch
from pai.executors.node.logfiles import CappedLogWriter, LogReader, follow_log, read_log

MIB = 1024 * 1024


def numbered_lines(count: int) -> list[bytes]:
    return [f"line {n:05d}\n".encode() for n in range(count)]


def test_writer_keeps_at_most_the_cap_and_at_least_half_of_it(tmp_path: Path) -> None:
    path = tmp_path / "user-stdout"
    writer = CappedLogWriter(path, cap_bytes=1000)
    lines = numbered_lines(1000)  # 11 KB through a 1 KB cap

    for line in lines:
        writer.write(line)
    writer.close()

    everything = b"".join(lines)
    kept = read_log(path)
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 1000
    assert len(kept) >= 500
    assert everything.endswith(kept)
    assert read_log(path, tail=30) == everything[-30:]
    assert read_log(path, tail=10_000) == kept


def test_a_single_write_larger_than_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "user-all"
    writer = CappedLogWriter(path, cap_bytes=100)

    data = bytes(range(256)) * 4
    writer.write(data)
    writer.close()

    kept = read_log(path)
    assert 50 <= len(kept) <= 100
    assert data.endswith(kept)


def test_reading_a_stream_that_does_not_exist_yet(tmp_path: Path) -> None:
    assert read_log(tmp_path / "user-stderr") == b""
    assert list(follow_log(tmp_path / "user-stderr", lambda: True)) == []


def test_follow_sees_everything_even_when_two_rotations_pass_it(tmp_path: Path) -> None:
    path = tmp_path / "user-stdout"
    records = [f"record-{n:02d}\n".encode() for n in range(30)]  # 10 bytes each
    writer = CappedLogWriter(path, cap_bytes=200)  # segments of 100 bytes: 10 records
    closed = False
    for record in records[:5]:
        writer.write(record)
    follower = follow_log(path, lambda: closed, tail=None, poll_interval=0.001)
    seen = [next(follower)]

    # While the follower waits, its segment fills up, is rotated, and is then replaced by the
    # next segment: the follower must read the rest of its own, then that one, then the current.
    for record in records[5:]:
        writer.write(record)
    writer.close()
    closed = True
    seen += list(follower)

    assert b"".join(seen) == b"".join(records)
    assert read_log(path) == b"".join(records[10:])


def test_follow_starts_from_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "user-stdout"
    writer = CappedLogWriter(path, cap_bytes=10_000)
    writer.write(b"old line\nnew line\n")
    writer.close()

    assert b"".join(follow_log(path, lambda: True, tail=9)) == b"new line\n"
    assert b"".join(follow_log(path, lambda: True)) == b""


def test_a_reader_polled_between_writes_sees_everything_across_rotations(tmp_path: Path) -> None:
    path = tmp_path / "user-stdout"
    reader = LogReader(path)
    assert reader.read() == b""  # the stream does not exist yet
    writer = CappedLogWriter(path, cap_bytes=200)
    lines = numbered_lines(60)  # 660 bytes: several rotations of 100-byte segments

    seen = b""
    for line in lines:
        writer.write(line)
        while data := reader.read(7):  # small reads: a rotation falls inside one of them
            seen += data
    writer.close()
    reader.close()

    assert seen == b"".join(lines)


def test_a_reader_can_start_where_an_earlier_copy_ended(tmp_path: Path) -> None:
    path = tmp_path / "user-stdout"
    path.write_bytes(b"copied already\nnew\n")

    resumed, at_end = LogReader(path, start=len(b"copied already\n")), LogReader(path, start=None)

    assert (resumed.read(), at_end.read()) == (b"new\n", b"")
    resumed.close()
    at_end.close()


@pytest.fixture
def small_disk(tmp_path: Path, requirement: Callable[[bool, str], None]) -> Iterator[Path]:
    requirement(os.geteuid() == 0, "mounting a small file system needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def test_a_log_stops_above_the_floor_says_so_and_goes_on_once_there_is_room(
    small_disk: Path,
) -> None:
    floor = DiskFloor.parse("1MiB")
    other = small_disk / "other"
    other.write_bytes(b"o" * 1024 * 1024)
    watch = RoomWatch(small_disk, floor, interval=0)  # looks at every write
    writer = CappedLogWriter(small_disk / "user-all", 64 * MIB, watch)
    line = b"x" * 4095 + b"\n"

    for _ in range(1024):  # 4 MiB of output on a 4 MiB disk
        writer.write(line)
    cut = (small_disk / "user-all").read_bytes()
    other.unlink()  # room is made
    writer.write(b"after\n")
    writer.close()

    assert shutil.disk_usage(small_disk).free >= MIB  # the store's share was never touched
    assert b"[pai] this log is cut here: the node is out of disk space" in cut
    tail = (small_disk / "user-all").read_bytes()[len(cut) :]
    assert tail.startswith(b"[pai] the log goes on: ")
    assert b"bytes of output were lost meanwhile\n" in tail
    assert tail.endswith(b"after\n")
