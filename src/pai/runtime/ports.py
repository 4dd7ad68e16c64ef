"""Host ports for tasks, allocated per node and checked free by binding on the node's address.

Tasks share their node's network (OpenPAI runs pods with host networking), so two tasks on one
node must never be handed the same port, and a port some other program holds must be skipped.
Every task gets `ssh: 1` and `http: 1` on top of what its role asks for, as OpenPAI's server adds
them. The allocator's state is what the controller persists per task (`PortAssignment`), so it
can be rebuilt after a restart without probing ports that running tasks hold.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

DEFAULT_PORT_RANGE = (15000, 40000)
REQUIRED_PORT_LABELS = ("ssh", "http")


class PortsExhaustedError(RuntimeError):
    """A node has fewer free ports in the range than a task asks for."""


def with_required_ports(request: Mapping[str, int]) -> dict[str, int]:
    """The role's port request plus one `ssh` and one `http` port unless it names them."""
    ports = {label: 1 for label in REQUIRED_PORT_LABELS}
    ports.update(request)
    return ports


def is_port_free(address: str, port: int) -> bool:
    """Whether TCP and UDP `port` can be bound on `address` right now."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


@dataclass(frozen=True)
class PortAssignment:
    """The ports one task holds on one node, label -> port numbers (in request order)."""

    owner: str
    node: str
    ports: Mapping[str, tuple[int, ...]]


class PortAllocator:
    """Hands out ports in `[start, end)` per node; a port is held until its owner is released.

    Allocation is next-fit from a per-node cursor, so a port released a moment ago (perhaps
    still in TIME_WAIT, perhaps still bound by a lingering process) is the last to be reused.
    """

    def __init__(
        self,
        start: int = DEFAULT_PORT_RANGE[0],
        end: int = DEFAULT_PORT_RANGE[1],
        *,
        probe: Callable[[str, int], bool] | None = is_port_free,
    ) -> None:
        """`probe(address, port)` says whether a port is free on a node; None when nodes are
        other machines, whose ports only the task's supervisor can check (and does, at start)."""
        if not 1024 <= start < end <= 65536:
            raise ValueError(f"port range [{start}, {end}) must lie within [1024, 65536)")
        self._start = start
        self._end = end
        self._probe = probe
        self._lock = threading.Lock()
        self._held: dict[str, dict[int, str]] = {}  # node -> port -> owner
        self._owned: dict[str, PortAssignment] = {}
        self._cursor: dict[str, int] = {}

    @property
    def port_range(self) -> tuple[int, int]:
        return (self._start, self._end)

    def allocate(
        self, owner: str, node: str, address: str, request: Mapping[str, int]
    ) -> dict[str, list[int]]:
        """Ports for `owner` on `node` (probed on `address`): `request` plus ssh and http.

        All or nothing: when the range runs out, nothing stays held and PortsExhaustedError says
        how many ports were missing.
        """
        wanted = with_required_ports(request)
        for label, count in wanted.items():
            if count < 0:
                raise ValueError(f"port label {label!r}: count must be >= 0, got {count}")
        total = sum(wanted.values())
        with self._lock:
            if owner in self._owned:
                raise ValueError(f"{owner} already holds ports; release them first")
            found = self._find_free(node, address, total)
            if len(found) < total:
                raise PortsExhaustedError(
                    f"node {node}: only {len(found)} of the {total} ports asked for are free in "
                    f"[{self._start}, {self._end})"
                )
            ports: dict[str, list[int]] = {}
            taken = iter(found)
            for label, count in wanted.items():
                ports[label] = [next(taken) for _ in range(count)]
            self._hold(PortAssignment(owner, node, {k: tuple(v) for k, v in ports.items()}))
            return ports

    def release(self, owner: str) -> None:
        """Give back every port `owner` holds; releasing an unknown owner does nothing."""
        with self._lock:
            assignment = self._owned.pop(owner, None)
            if assignment is None:
                return
            held = self._held[assignment.node]
            for numbers in assignment.ports.values():
                for port in numbers:
                    held.pop(port, None)

    def restore(self, assignments: Iterable[PortAssignment]) -> None:
        """Mark persisted assignments as held (after a restart); their ports are not probed."""
        with self._lock:
            for assignment in assignments:
                if assignment.owner in self._owned:
                    raise ValueError(f"{assignment.owner} already holds ports")
                held = self._held.setdefault(assignment.node, {})
                for numbers in assignment.ports.values():
                    for port in numbers:
                        if port in held:
                            raise ValueError(
                                f"node {assignment.node}: port {port} of {assignment.owner} is "
                                f"also held by {held[port]}"
                            )
                self._hold(assignment)

    def assignments(self) -> list[PortAssignment]:
        with self._lock:
            return list(self._owned.values())

    def _hold(self, assignment: PortAssignment) -> None:
        held = self._held.setdefault(assignment.node, {})
        for numbers in assignment.ports.values():
            for port in numbers:
                held[port] = assignment.owner
        self._owned[assignment.owner] = assignment

    def _find_free(self, node: str, address: str, count: int) -> list[int]:
        held = self._held.get(node, {})
        span = self._end - self._start
        cursor = self._cursor.get(node, self._start)
        found: list[int] = []
        for step in range(span):
            if len(found) == count:
                break
            port = self._start + (cursor - self._start + step) % span
            if port not in held and (self._probe is None or self._probe(address, port)):
                found.append(port)
        if found:
            self._cursor[node] = self._start + (found[-1] + 1 - self._start) % span
        return found
