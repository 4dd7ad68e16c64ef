"""Port allocation: no port twice on a node, never one another program holds."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from pai.runtime.ports import PortAllocator, PortAssignment, PortsExhaustedError, is_port_free

NODE_ADDRESS = "127.0.0.3"


@pytest.fixture
def held_socket() -> Iterator[int]:
    """A port some other program listens on, on the node's address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind((NODE_ADDRESS, 0))
        server.listen()
        yield server.getsockname()[1]


def flat(ports: dict[str, list[int]]) -> list[int]:
    return [port for numbers in ports.values() for port in numbers]


def test_every_task_gets_ssh_and_http_plus_what_it_asks_for() -> None:
    allocator = PortAllocator(20000, 20100)

    ports = allocator.allocate("job-w-0", "node3", NODE_ADDRESS, {"dist": 2})

    assert list(ports) == ["ssh", "http", "dist"]
    assert [len(ports[label]) for label in ports] == [1, 1, 2]
    assert len(set(flat(ports))) == 4
    assert all(20000 <= port < 20100 for port in flat(ports))


def test_a_port_held_by_another_socket_is_skipped(held_socket: int) -> None:
    allocator = PortAllocator(held_socket, held_socket + 20)

    ports = allocator.allocate("job-w-0", "node3", NODE_ADDRESS, {})

    assert held_socket not in flat(ports)
    assert not is_port_free(NODE_ADDRESS, held_socket)


def test_ports_are_not_handed_out_twice_while_held_and_come_back_when_released() -> None:
    allocator = PortAllocator(21000, 21004)
    first = allocator.allocate("a", "node3", NODE_ADDRESS, {})
    second = allocator.allocate("b", "node3", NODE_ADDRESS, {})
    assert not set(flat(first)) & set(flat(second))

    with pytest.raises(PortsExhaustedError, match="node node3: only 0 of the 2 ports"):
        allocator.allocate("c", "node3", NODE_ADDRESS, {})
    # The failed attempt left nothing held.
    assert {assignment.owner for assignment in allocator.assignments()} == {"a", "b"}

    allocator.release("a")
    assert sorted(flat(allocator.allocate("c", "node3", NODE_ADDRESS, {}))) == sorted(flat(first))


def test_nodes_have_separate_port_spaces() -> None:
    allocator = PortAllocator(21100, 21102)

    on_three = allocator.allocate("a", "node3", "127.0.0.3", {})
    on_four = allocator.allocate("b", "node4", "127.0.0.4", {})

    assert flat(on_three) == flat(on_four)


def test_rebuilt_from_persisted_assignments_after_a_restart() -> None:
    before = PortAllocator(21200, 21206)
    before.allocate("a", "node3", NODE_ADDRESS, {"dist": 1})
    persisted = before.assignments()

    after = PortAllocator(21200, 21206)
    after.restore(persisted)
    fresh = after.allocate("b", "node3", NODE_ADDRESS, {})

    held = {
        port for assignment in persisted for ports in assignment.ports.values() for port in ports
    }
    assert not held & set(flat(fresh))
    with pytest.raises(ValueError, match="also held by a"):
        PortAllocator(21200, 21206).restore(
            [*persisted, PortAssignment("z", "node3", {"ssh": (min(held),)})]
        )


def test_owner_cannot_allocate_twice_and_range_is_validated() -> None:
    allocator = PortAllocator(21300, 21310)
    allocator.allocate("a", "node3", NODE_ADDRESS, {})

    with pytest.raises(ValueError, match="already holds ports"):
        allocator.allocate("a", "node3", NODE_ADDRESS, {})
    with pytest.raises(ValueError, match="port range"):
        PortAllocator(80, 90)
