"""`Fleet`: how the control plane reaches the agents of one engine's nodes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pai.executors.base import NodeState

Handler = Callable[[Any], None]
"""What to do with a call's answer (or with the exception the call ended with)."""


@dataclass(frozen=True)
class Member:
    """A node of the cluster file as the engine sees it now."""

    state: NodeState
    instance: str | None
    """The live machine that is this node (None when there is none): another one means the
    node left and joined again, and its agent must be started anew."""
    where: str = ""
    """How the engine names that machine, for the log (its address)."""


class Fleet(Protocol):
    """The engine-specific part of an `AgentExecutor`. `call` may be called from any thread;
    `answers` from one thread at a time."""

    def members(self) -> Mapping[str, Member]:
        """Every node of the cluster file, by name: the very same mapping, unchanged, as long
        as nothing changed spares the control plane a pass over it."""

    def start_agent(self, node: str, instance: str) -> Any:
        """Start (or find) the agent of `node` on machine `instance`; a handle for `call`."""

    def call(self, agent: Any, method: str, args: tuple[Any, ...], on_answer: Handler) -> None:
        """Send `agent.method(*args)` and return at once; `answers` delivers its answer. One
        caller's calls reach an agent in order, but for `poll`: an agent holds a poll without
        news (up to its wait), and must take other calls meanwhile."""

    def answers(self, timeout: float) -> list[tuple[Handler, Any]]:
        """The calls answered within `timeout` (at least one, unless none was), each as its
        handler and its answer or the exception it ended with."""

    def close(self) -> None:
        """Stop reaching the agents (they and their tasks go on where the engine allows)."""
