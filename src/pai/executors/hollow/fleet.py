"""`HollowFleet`: the agents of hollow nodes, answering in this process.

Calls are queued and answered by the thread that collects answers (`answers`), in the order they
were sent, as Ray delivers one caller's calls to an actor. Everything that happens by itself on
a node (a task's end, the fence) is a timer on one heap, run by that same thread before it
answers: no thread per node, and no pass over every node or task.

Long polls: a `poll` whose reply would carry nothing is held, as a Ray agent holds it, and
answered once its agent has news (a task started or ended) or its `wait` has passed, whichever
comes first; the expiry is a timer on the same heap. An idle node costs one call per `wait`.

Node loss (`loss`, `loss_every`): every `loss_every` seconds, the nodes that went silent the
time before answer again and another `loss` share of the nodes, drawn at random, goes silent
for the next `loss_every` seconds, as behind a cut network. A silent node's agent receives
nothing; the calls sent to it meanwhile are lost, and fail once it answers again. Its tasks go
on until the agent's fence stops them, and the control plane gives them up and retries them
elsewhere, as with a real node (`pai.executors.agents.executor`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from pai.cluster.model import ClusterConfig
from pai.executors.agents.fleet import Handler, Member
from pai.executors.agents.wire import Report
from pai.executors.base import NodeCondition, NodeState
from pai.executors.hollow.agent import HollowAgent

log = logging.getLogger(__name__)


class HollowNodeSilent(ConnectionError):
    """A call went to a hollow node while it was silent: it never arrived."""


class HollowFleet:
    """The `Fleet` of hollow nodes (see the module docstring): every node of `cluster`."""

    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        node_timeout: float,
        loss: float = 0.0,
        loss_every: float = 60.0,
        seed: int | None = None,
    ) -> None:
        if not 0 <= loss <= 1:
            raise ValueError(f"the share of hollow nodes lost must be between 0 and 1, got {loss}")
        if loss and not loss_every > 0:
            raise ValueError(f"hollow nodes are lost every > 0 seconds, got {loss_every}")
        self._node_timeout = node_timeout
        instance = uuid.uuid4().hex  # a new fleet is new machines: their agents start anew
        self._members = {
            spec.name: Member(NodeState(spec.name, NodeCondition.ALIVE), instance, spec.address)
            for spec in cluster.nodes
        }
        self._agents: dict[str, HollowAgent] = {}
        self._condition = threading.Condition()
        self._queue: deque[tuple[HollowAgent, str, tuple[Any, ...], Handler]] = deque()
        self._ready: list[tuple[Handler, Any]] = []  # answered by timers, or lost to silence
        self._held: dict[str, tuple[HollowAgent, int, Handler]] = {}  # node: its held poll
        self._news: set[str] = set()  # nodes with news since their held poll was looked at
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._silent: dict[str, list[Handler]] = {}  # silent nodes, with the calls they missed
        self._loss_count = math.ceil(loss * len(self._members)) if loss else 0
        self._loss_every = loss_every
        self._random = random.Random(seed)
        if self._loss_count:
            self.schedule(time.monotonic() + loss_every, self._rotate_loss)

    # -- the Fleet protocol -----------------------------------------------------------------------

    def members(self) -> Mapping[str, Member]:
        """The same nodes, for good (silence is not absence)."""
        return self._members

    def start_agent(self, node: str, instance: str) -> HollowAgent:
        with self._condition:
            agent = self._agents.get(node)
            if agent is None:
                agent = self._agents[node] = HollowAgent(
                    node, self.schedule, self._news.add, self._node_timeout
                )
            return agent

    def call(self, agent: Any, method: str, args: tuple[Any, ...], on_answer: Handler) -> None:
        with self._condition:
            self._queue.append((agent, method, args, on_answer))
            self._condition.notify()

    def answers(self, timeout: float) -> list[tuple[Handler, Any]]:
        with self._condition:
            if not self._queue and not self._ready:
                if self._timers:
                    timeout = min(timeout, max(0.0, self._timers[0][0] - time.monotonic()))
                self._condition.wait(timeout)
            calls, self._queue = self._queue, deque()
        self._run_due_timers()
        for agent, method, args, handler in calls:
            missed = self._silent.get(agent.node)
            if missed is not None:
                missed.append(handler)
            elif method == "poll":
                self._poll(agent, args, handler)
            else:
                self._ready.append(self._answer(agent, method, args, handler))
        self._answer_news()
        answered, self._ready = self._ready, []
        return answered

    def close(self) -> None:
        """Hollow nodes live in this process: they end with it."""

    # -- long polls -------------------------------------------------------------------------------

    def _poll(self, agent: HollowAgent, args: tuple[Any, ...], handler: Handler) -> None:
        earlier = self._held.get(agent.node)
        if earlier is not None:  # one held poll per node: the earlier one gets what there is
            self._release(agent.node, earlier[2])
        answer = self._answer(agent, "poll", args, handler)
        ack: int = args[0]
        wait: float = args[1] if len(args) > 1 else 0.0
        if not isinstance(answer[1], Report) or answer[1].items or wait <= 0:
            self._ready.append(answer)
            return
        self._held[agent.node] = (agent, ack, handler)
        self.schedule(time.monotonic() + wait, lambda: self._release(agent.node, handler))

    def _release(self, node: str, handler: Handler) -> None:
        """Answer the held poll of `node`, if `handler`'s is still held."""
        held = self._held.get(node)
        if held is not None and held[2] is handler:
            del self._held[node]
            agent, ack, _ = held
            self._ready.append(self._answer(agent, "poll", (ack,), handler))

    def _answer_news(self) -> None:
        for node in self._news:
            held = self._held.get(node)
            if held is not None:
                self._release(node, held[2])
        self._news.clear()

    @staticmethod
    def _answer(
        agent: HollowAgent, method: str, args: tuple[Any, ...], handler: Handler
    ) -> tuple[Handler, Any]:
        try:
            return handler, getattr(agent, method)(*args)
        except Exception as error:  # the call's own exception, as a real agent's
            return handler, error

    # -- timers and loss --------------------------------------------------------------------------

    def schedule(self, at: float, action: Callable[[], None]) -> None:
        """Run `action` at `at` (`time.monotonic()`), in the thread that collects answers."""
        heapq.heappush(self._timers, (at, next(self._order), action))

    def silent_nodes(self) -> set[str]:
        """The nodes that answer nothing now."""
        return set(self._silent)

    def _run_due_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, action = heapq.heappop(self._timers)
            try:
                action()
            except Exception:  # one node's trouble must not stop the others' timers
                log.exception("a hollow node's timer failed")

    def _rotate_loss(self) -> None:
        for node, missed in self._silent.items():
            log.warning("hollow node %s answers again", node)
            error = HollowNodeSilent(f"hollow node {node} was silent: the call never arrived")
            self._ready += [(handler, error) for handler in missed]
        self._silent = {
            node: [] for node in self._random.sample(sorted(self._members), self._loss_count)
        }
        for node, missed in self._silent.items():  # a held poll's answer is lost on the way
            held = self._held.pop(node, None)
            if held is not None:
                missed.append(held[2])
        log.warning(
            "hollow nodes going silent for %g s: %s", self._loss_every, ", ".join(self._silent)
        )
        for node in self._silent:
            agent = self._agents.get(node)
            if agent is not None:
                agent.watch_contact()
        self.schedule(time.monotonic() + self._loss_every, self._rotate_loss)
