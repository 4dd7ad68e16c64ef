"""`pai up`'s check that its port is free: what a killed server left behind does not hold the
port, a live listener does, with a message that says so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.pai_runner import make_pai
from pai.cli.up import check_port_free
from server.harness import LOCAL_CLUSTER_FILE


def _listener() -> socket.socket:
    """A listening socket as servers make them (SO_REUSEADDR) on a free loopback port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


@pytest.fixture
def port_held_by_time_wait() -> int:
    """A port whose only socket is a connection the server closed first, now in TIME_WAIT, as
    a killed server leaves its clients' connections."""
    with _listener() as listener:
        port = int(listener.getsockname()[1])
        with socket.create_connection(("127.0.0.1", port)) as client:
            served, _ = listener.accept()
            served.close()
            client.recv(1)  # the server's FIN has arrived; closing now completes the exchange
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the port check did before: refused
    return port


@pytest.fixture
def live_listener() -> Iterator[int]:
    with _listener() as listener:
        yield int(listener.getsockname()[1])


def test_a_port_held_only_by_time_wait_is_free(port_held_by_time_wait: int) -> None:
    check_port_free("127.0.0.1", port_held_by_time_wait)


def test_a_live_listener_still_holds_the_port(live_listener: int) -> None:
    with pytest.raises(OSError, match="is PAI already running"):
        check_port_free("127.0.0.1", live_listener)


def test_pai_up_on_a_port_in_use_says_so(live_listener: int, tmp_path: Path) -> None:
    pai = make_pai(tmp_path)
    result = pai.run(
        "up",
        "--port",
        str(live_listener),
        "--home",
        str(tmp_path / "home"),
        "--cluster",
        str(LOCAL_CLUSTER_FILE),
    )
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert said.startswith(f"error: cannot listen on 127.0.0.1:{live_listener}"), said
    assert "is PAI already running? Choose another port with --port" in said
