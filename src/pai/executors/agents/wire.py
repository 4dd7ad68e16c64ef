"""What a node's agent answers the control plane's calls with (see `pai.executors.agents`)."""

from __future__ import annotations

from dataclasses import dataclass

from pai.executors.base import LogStream, TaskEvent, TaskStatus
from pai.executors.node.usage import Usage


@dataclass(frozen=True)
class LogChunk:
    """Output of one stream of a task, in the order it was written."""

    key: str
    stream: LogStream
    data: bytes


Item = LogChunk | TaskEvent


@dataclass(frozen=True)
class AgentInfo:
    node: str
    incarnation: str
    """New each time the agent starts: a new one means it restarted and lost what it held."""
    version: str
    root: str
    isolation: str
    """What separates tasks from this node ("container", "host" or "hollow"), as it decided."""
    problem: str | None = None
    """Why the node takes no tasks (containers required, and it has no runtime)."""


@dataclass(frozen=True)
class Report:
    incarnation: str
    items: tuple[tuple[int, Item], ...]
    usage: Usage | None = None
    """What the node and its tasks used, when a sample was due (not numbered: a lost one is
    not worth sending again)."""
    disk_problem: str | None = None
    """Why no task may start on the node for now: its disk under PAI's floor, or its container
    runtime unable to start a container (None while tasks may start)."""


@dataclass(frozen=True)
class Recovery:
    """The node's task attempts, and the rest of the output of those the control plane asked
    to resume that have finished."""

    statuses: tuple[TaskStatus, ...]
    chunks: tuple[LogChunk, ...]
