"""How `pai run` writes its tasks' output: whole lines, each with its task's prefix, coloured
per task on a terminal."""

from __future__ import annotations

import io
from collections.abc import Iterator

from pai.localrun.relay import Relay


def chunks(*parts: bytes) -> Iterator[bytes]:
    yield from parts


def test_lines_split_across_chunks_are_written_whole_with_their_prefix() -> None:
    out, notes = io.BytesIO(), io.BytesIO()
    relay = Relay(out, notes, colour=False)

    relay.follow("srv/0", lambda: chunks(b"hel", b"lo\nwor", b"ld\n", b"no newline"))
    relay.wait()

    assert out.getvalue() == b"[srv/0] hello\n[srv/0] world\n[srv/0] no newline\n"
    assert notes.getvalue() == b""


def test_each_task_has_its_own_colour_on_a_terminal() -> None:
    out, notes = io.BytesIO(), io.BytesIO()
    relay = Relay(out, notes, colour=True)

    relay.follow("srv/0", lambda: chunks(b"a\n"))
    relay.wait()
    relay.follow("cli/0", lambda: chunks(b"b\n"))
    relay.wait()
    relay.note("srv/0", "ended")

    first, second = out.getvalue().splitlines()
    assert first == b"\x1b[36m[srv/0]\x1b[0m a"
    assert second == b"\x1b[33m[cli/0]\x1b[0m b"
    assert notes.getvalue() == b"\x1b[36m[srv/0]\x1b[0m pai run: ended\n"


def test_a_shells_output_is_written_as_it_comes() -> None:
    out, notes = io.BytesIO(), io.BytesIO()
    relay = Relay(out, notes, colour=False, prefixed=False)

    relay.follow("srv/0", lambda: chunks(b"$ ", b"ls\n"))
    relay.wait()

    assert out.getvalue() == b"$ ls\n"
