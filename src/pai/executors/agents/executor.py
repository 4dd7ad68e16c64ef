"""`AgentExecutor`: the control plane's side of an engine whose nodes each run an agent.

It keeps one link per node of the cluster file. A node is usable once its engine (the `Fleet`)
has a live machine for it, as large as the cluster file says, and PAI's agent runs there and
has answered. Launches and stops go to the agent at once (the fleet delivers one caller's calls
to an agent in order, but for polls, which a held one must not hold up); a background thread
follows every agent's tasks' events and output, keeps a copy of every log (`LogMirror`), and
watches the fleet's members. After a control-plane restart `recover()` finds the agents and
resumes from what they report.

Long polls. Each agent has one `poll(ack, wait)` outstanding at a time: the agent answers it at
once when it has news (a task started or ended, output), else holds it for up to `wait` seconds;
the next is sent when it is answered (no sooner than `poll_interval` after the last one, so a
node that always has news is asked at that rate). An idle node thus costs one call per `wait`,
and news arrives as soon as it happens. What is due later (the next poll, a retry, a deadline
for an answer, a give-up) waits in a heap: no pass walks every node or task.

Losing a node. An agent silent for longer than its poll's `wait` and `poll_timeout` (or that
leaves another call unanswered for `poll_timeout`) makes its node "unreachable since" its last
answer, at once, long before the engine notices a cut network. Its
tasks are given up (ended with the retryable code of a lost node, so the controller retries them
elsewhere) only once the node timeout and the task's grace period have passed since that last
answer, whether the engine has declared the node gone meanwhile or not: by then the agent,
which has not heard from the control plane for as long, has stopped them (see
`pai.executors.ray.agent`), so two runs of a task never overlap. A node is usable again when
its agent answers, or when it rejoins.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pai import __version__
from pai.cluster.model import ClusterConfig
from pai.executors.agents.fleet import Fleet, Member
from pai.executors.agents.mirror import LogMirror
from pai.executors.agents.wire import AgentInfo, LogChunk, Recovery, Report
from pai.executors.base import (
    ExecutorError,
    KillReason,
    LogStream,
    NodeCondition,
    NodeState,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
    TaskResult,
    TaskStatus,
    UnknownTaskError,
    check_task_key,
)
from pai.executors.isolation.policy import HOST
from pai.executors.node.taskfiles import SupervisorConfig, utc_now
from pai.executors.node.usage import Usage
from pai.runtime.classification import ExitCode
from pai.runtime.exitspec import ExitSpecSource

log = logging.getLogger(__name__)

AGENT_RETRY_INTERVAL = 5.0
USAGE_KEPT = 1000
"""Usage reports kept for the monitor at most (older ones are dropped if nobody asks)."""
RECOVER_TIMEOUT = 120.0
"""How long a start waits for the agents of the live nodes (starting one takes a second or two)."""
DEFAULT_NODE_TIMEOUT = 30.0
"""How long a node's agent may go without the control plane before it stops its tasks."""
DEFAULT_POLL_TIMEOUT = 3.0
"""How long an agent may leave a call unanswered before its node is shown unreachable (beyond
a held poll's wait)."""
DEFAULT_POLL_WAIT = 5.0
"""How long an agent holds a poll without news, at most: an idle node is asked this often."""
WAITS_PER_NODE_TIMEOUT = 3
"""Polls per node timeout at least, whatever the wait: a node is never fenced between two."""
FENCE_MARGIN = 2.0
"""What the give-up waits beyond an agent's stop: its checks' interval and a signal's way."""
SHOWN = frozenset({"state", "ready", "problem", "disk_problem", "unreachable"})
"""What a node's state as shown (`_Link.usable_state`) is made of."""


@dataclass
class _Attempt:
    """A task attempt that runs (or is being started) on a node, as far as PAI knows."""

    node: str
    grace: float
    """The task's grace period between SIGTERM and SIGKILL."""
    started_at: datetime | None = None
    kill_reason: KillReason | None = None


@dataclass
class _Link:
    """PAI's connection to one node of the cluster file and its agent."""

    node: str
    state: NodeState
    instance: str | None = None  # the fleet's machine that is this node, while live
    where: str = ""  # that machine, as the fleet names it
    agent: Any = None  # the actor handle, once created
    incarnation: str | None = None
    ready: bool = False  # recovered: takes launches and is polled
    ack: int = 0  # the last report item applied
    polling: bool = False  # a poll is outstanding
    poll_sent: float = 0.0  # when the last poll was sent (monotonic)
    exit_spec_sent: tuple[str | None] | None = None  # (text,) once sent to this agent
    problem: str | None = None  # why a live, large enough node still cannot be used
    isolation: str = HOST  # what separates tasks from the node, as its agent decided
    retry_at: float | None = None  # when to try reaching the agent again
    disk_problem: str | None = None  # the node's disk is below PAI's floor, as its agent says
    asked_at: float | None = None  # when the oldest call still unanswered was sent
    last_answer: float | None = None  # when the agent last answered (monotonic), kept
    last_answer_at: datetime | None = None  # the same, on the clock
    unreachable: str | None = None  # why the node is shown unreachable, while it is
    check_at: float | None = None  # when its answers are next looked at (monotonic)
    changed: set[str] = field(default_factory=set, repr=False)
    """Where the node's name goes when its shown state may have changed (shared by the links
    of one executor, so that showing the nodes' states costs nothing for those unchanged)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SHOWN and "changed" in self.__dict__ and self.__dict__[name] != value:
            self.changed.add(self.node)
        object.__setattr__(self, name, value)

    def usable_state(self) -> NodeState:
        if self.unreachable is not None and self.state.condition is not NodeCondition.GONE:
            return NodeState(self.node, NodeCondition.UNREACHABLE, self.unreachable)
        if not self.state.usable:
            return self.state
        if self.problem is not None:
            return NodeState(self.node, NodeCondition.BAD, self.problem)
        if self.disk_problem is not None:
            return NodeState(self.node, NodeCondition.BAD, self.disk_problem)
        if not self.ready:
            message = f"node {self.node} joined; PAI's agent is starting on it"
            return NodeState(self.node, NodeCondition.BAD, message)
        return self.state

    def disconnect(self) -> None:
        """Forget the agent (the node left); when it last answered is kept."""
        self.instance = self.agent = self.incarnation = self.problem = None
        self.exit_spec_sent = self.retry_at = self.disk_problem = None
        self.asked_at = self.check_at = None
        self.unreachable = None
        self.ready = self.polling = False
        self.ack = 0

    def silent_since(self) -> datetime:
        """When the agent last answered (now, if it never has)."""
        return self.last_answer_at or utc_now()

    def asked(self, now: float) -> None:
        if self.asked_at is None:
            self.asked_at = now

    def answered(self) -> None:
        self.asked_at = None
        self.last_answer = time.monotonic()
        self.last_answer_at = utc_now()
        if self.unreachable is not None:
            log.warning("node %s: its agent answers again", self.node)
            self.unreachable = None


class AgentExecutor:
    """The `Executor` of an engine of agents (see the module docstring)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        state_dir: Path,
        fleet: Fleet,
        *,
        node_dir: Path,
        store_id: str,
        config: SupervisorConfig | None = None,
        exit_specs: ExitSpecSource | None = None,
        poll_interval: float = 0.1,
        node_refresh_interval: float = 1.0,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        poll_timeout: float = DEFAULT_POLL_TIMEOUT,
        poll_wait: float = DEFAULT_POLL_WAIT,
    ) -> None:
        """`node_dir`: the directory on every node under which agents keep their state and the
        tasks' working and log directories (`<node_dir>/<store_id>/<node>/...`); `store_id`
        names the store this control plane serves, so that another one's agents, tasks and
        logs (another installation, or this one before its store was reset) are never taken
        for its own. `node_timeout`: see the module docstring (the fleet's agents must stop
        their tasks after as long). `poll_wait`: how long an agent holds a poll without news (at
        most a third of `node_timeout`)."""
        if not node_dir.is_absolute():
            raise ValueError(f"the nodes' directory must be an absolute path, got {node_dir}")
        self._cluster = cluster
        self._fleet = fleet
        self._node_dir = node_dir / store_id
        self._config = config or SupervisorConfig()
        self._exit_specs = exit_specs or ExitSpecSource()
        self._mirror = LogMirror(state_dir / store_id / "logs", self._config.log_cap_bytes)
        self._poll_interval = poll_interval
        self._node_timeout = node_timeout
        self._poll_timeout = poll_timeout
        self._poll_wait = min(poll_wait, node_timeout / WAITS_PER_NODE_TIMEOUT)
        self._node_refresh_interval = node_refresh_interval
        self._lock = threading.RLock()
        self._changed: set[str] = set()  # nodes whose shown state may differ from `_states`
        self._links = {
            node.name: _Link(
                node.name,
                NodeState(node.name, NodeCondition.GONE, "not seen yet"),
                changed=self._changed,
            )
            for node in cluster.nodes
        }
        self._states = {name: link.usable_state() for name, link in self._links.items()}
        self._live: dict[str, _Attempt] = {}
        self._on_node: defaultdict[str, set[str]] = defaultdict(set)  # node: keys in `_live`
        self._due: list[tuple[float, int, Callable[[], None]]] = []  # a heap of what is due
        self._order = itertools.count()
        self._events: list[TaskEvent] = []
        self._usage: list[Usage] = []
        self._recovered: list[TaskStatus] | None = None  # collected by `recover()` while it runs
        self._next_refresh = 0.0
        self._members: Mapping[str, Member] | None = None  # the fleet's, as last followed
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the Executor protocol --------------------------------------------------------------------

    def attempt_dir(self, node: str, job: str, key: str) -> Path:
        return self._node_dir / node / "jobs" / job / check_task_key(key)

    def isolation_on(self, node: str) -> str:
        with self._lock:
            link = self._links.get(node)
            return link.isolation if link is not None else HOST

    def node_states(self) -> Mapping[str, NodeState]:
        with self._lock:
            for name in self._changed:
                self._states[name] = self._links[name].usable_state()
            self._changed.clear()
            return dict(self._states)

    def launch(self, task: TaskLaunch) -> None:
        key = check_task_key(task.key)
        with self._lock:
            if key in self._live or self._mirror.knows(key):
                raise ExecutorError(f"task {key} was launched before")
            link = self._links.get(task.node)
            if link is None:
                raise ExecutorError(f"task {key}: node {task.node} is not in the cluster file")
            state = link.usable_state()
            if not state.usable:
                raise ExecutorError(f"task {key}: {state.message}")
            self._send_exit_spec(link)
            grace = task.stop_grace_seconds
            self._add_attempt(
                key,
                _Attempt(task.node, self._config.stop_grace_seconds if grace is None else grace),
            )
            self._mirror.start(key)
            self._fleet.call(
                link.agent, "launch", (task,), lambda answer: self._launched(key, answer)
            )

    def kill(self, key: str, reason: KillReason) -> None:
        with self._lock:
            attempt = self._live.get(check_task_key(key))
            if attempt is None:
                if self._mirror.knows(key):
                    return  # it has ended
                raise UnknownTaskError(f"no task attempt {key!r} was launched here")
            attempt.kill_reason = reason
            link = self._links[attempt.node]
            if link.agent is not None:
                self._fleet.call(link.agent, "kill", (key, reason), self._ignore)

    def events(self) -> list[TaskEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def usage(self) -> Usage:
        with self._lock:
            reports, self._usage = self._usage, []
        return Usage(
            tuple(task for report in reports for task in report.tasks),
            tuple(node for report in reports for node in report.nodes),
        )

    def recover(self) -> list[TaskStatus]:
        """Connect to the agents of the live nodes, report every task attempt they know, and
        start following them. Nodes whose agent cannot start within RECOVER_TIMEOUT are
        connected later, like nodes that join."""
        with self._lock:
            self._recovered = []
        deadline = time.monotonic() + RECOVER_TIMEOUT
        self._refresh_nodes()
        while time.monotonic() < deadline and self._connecting():
            self._step(min(self._poll_interval, max(0.0, deadline - time.monotonic())))
        with self._lock:
            statuses, self._recovered = self._recovered, None
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="pai-agent-executor", daemon=True
            )
            self._thread.start()
        return statuses

    def logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = None
    ) -> bytes:
        return self._mirror.read(key, stream, tail)

    def follow_logs(
        self,
        key: str,
        stream: LogStream = LogStream.ALL,
        *,
        tail: int | None = 0,
        poll_interval: float = 0.2,
    ) -> Iterator[bytes]:
        return self._mirror.follow(key, stream, tail, poll_interval)

    def close(self) -> None:
        """Stop following the agents (they and their tasks go on) and let go of the fleet."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._fleet.close()

    # -- the background thread --------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._step(self._poll_interval)
            except Exception:  # an engine's hiccups must not end the following of every task
                log.exception("following the nodes' agents failed; retrying")
                self._closing.wait(1.0)

    def _step(self, timeout: float) -> None:
        now = time.monotonic()
        if now >= self._next_refresh:
            self._refresh_nodes()
        with self._lock:
            while self._due and self._due[0][0] <= now:
                _, _, action = heapq.heappop(self._due)
                action()
            if self._due:
                timeout = min(timeout, self._due[0][0] - now)
        timeout = max(0.0, min(timeout, self._next_refresh - now))
        for handler, answer in self._fleet.answers(timeout):
            with self._lock:
                handler(answer)

    def _at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` (under the lock) once `time.monotonic()` reaches `when`."""
        heapq.heappush(self._due, (when, next(self._order), action))

    def _connecting(self) -> bool:
        with self._lock:
            return any(
                link.agent is not None and not link.ready and link.problem is None
                for link in self._links.values()
            )

    # -- nodes ------------------------------------------------------------------------------------

    def _expect_answer(self, link: _Link, by: float) -> None:
        """Look at `by` whether the node answered in time (one look per node is pending at
        most: it looks again later while a call is outstanding)."""
        if link.check_at is not None and link.check_at <= by:
            return
        link.check_at = by
        self._at(by, lambda: self._check_contact(link, by))

    def _check_contact(self, link: _Link, planned: float) -> None:
        """Show the node unreachable once it has been silent too long: a call other than a poll
        unanswered for `poll_timeout`, or nothing heard for a poll's wait and `poll_timeout`
        since the poll was sent."""
        if link.check_at != planned:
            return  # an earlier look took its place
        link.check_at = None
        if link.unreachable is not None or link.agent is None:
            return
        now = time.monotonic()
        late = link.asked_at is not None and now - link.asked_at > self._poll_timeout
        if not late and link.asked_at is not None:
            self._expect_answer(link, link.asked_at + self._poll_timeout)
        if not late and link.polling:
            heard = max(link.poll_sent, link.last_answer or 0.0)
            deadline = heard + self._poll_wait + self._poll_timeout
            late = now > deadline
            if not late:
                self._expect_answer(link, deadline)
        if not late:
            return
        since = link.silent_since().isoformat(timespec="seconds")
        link.unreachable = (
            f"unreachable since {since}: PAI's agent on node "
            f"{link.node} does not answer; its tasks stop by themselves after "
            f"{self._node_timeout:g} s without the control plane and are retried elsewhere "
            "once their grace period has passed too"
        )
        log.warning("node %s: %s", link.node, link.unreachable)
        self._give_up_stopped(link)

    def _give_up_stopped(self, link: _Link) -> None:
        """Give the tasks of an unreachable or departed node up once its agent has surely
        stopped them; look again when the next one will have."""
        if (link.unreachable is None and link.instance is not None) or link.last_answer is None:
            return
        now = time.monotonic()
        reached = link.last_answer
        later = []
        for key in sorted(self._on_node[link.node]):
            stopped = reached + self._node_timeout + self._live[key].grace + FENCE_MARGIN
            if now < stopped:
                later.append(stopped)
                continue
            since = link.silent_since().isoformat(timespec="seconds")
            self._finish(
                key,
                ExitCode.POD_NODE_LOST,
                f"node {link.node} was unreachable since {since}: its agent has stopped "
                "the task there, and it is retried elsewhere",
            )
        if later:
            self._at(min(later), lambda: self._give_up_stopped(link))

    def _refresh_nodes(self) -> None:
        self._next_refresh = time.monotonic() + self._node_refresh_interval
        members = self._fleet.members()
        if members is self._members:
            return  # unchanged: every link follows it already
        self._members = members
        with self._lock:
            for name, member in members.items():
                link = self._links[name]
                if link.instance is not None and member.instance != link.instance:
                    self._node_left(link)
                link.state = member.state
                if member.instance is not None and link.instance is None:
                    link.instance, link.where = member.instance, member.where
                    link.agent = self._fleet.start_agent(name, member.instance)
                    self._ask_info(link)

    def _node_left(self, link: _Link) -> None:
        """Its tasks are given up once they have surely stopped: a node
        that the engine lost behind a cut network may still run them."""
        log.warning("node %s (%s) left the cluster", link.node, link.where)
        link.disconnect()
        self._give_up_stopped(link)

    def _ask_info(self, link: _Link) -> None:
        link.ready = False
        link.retry_at = link.problem = None
        now = time.monotonic()
        link.asked(now)
        if link.asked_at is not None:
            self._expect_answer(link, link.asked_at + self._poll_timeout)
        agent = link.agent
        self._fleet.call(agent, "info", (), lambda answer: self._on_info(link, agent, answer))

    def _on_info(self, link: _Link, agent: Any, answer: AgentInfo | Exception) -> None:
        if agent is not link.agent:
            return  # the node left meanwhile
        if isinstance(answer, Exception):
            link.problem = f"PAI's agent could not start on node {link.node}: {answer}"
            if link.last_answer is None:
                link.asked_at = None  # never reached: an agent that cannot start, shown so
            self._retry_later(link)
            log.warning("%s", link.problem)
            return
        link.answered()
        if answer.version != __version__:
            link.problem = (
                f"node {link.node} runs PAI {answer.version}, the control plane {__version__}: "
                "install the same version on every node"
            )
            log.warning("%s", link.problem)
            return
        if answer.problem is not None:
            link.problem = f"node {link.node}: {answer.problem}"
            log.warning("%s", link.problem)
            return
        link.isolation = answer.isolation
        link.incarnation = answer.incarnation
        resume = {key: self._mirror.resume_points(key) for key in self._on_node[link.node]}
        if self._recovered is not None:  # a control-plane start: any incomplete copy may be its
            resume.update(self._incomplete_copies())
        self._fleet.call(
            agent, "recover", (resume,), lambda answer: self._on_recovery(link, agent, answer)
        )

    def _incomplete_copies(self) -> dict[str, dict[str, int | None]]:
        return {
            key: self._mirror.resume_points(key)
            for key in self._mirror.incomplete()
            if key not in self._live
        }

    def _on_recovery(self, link: _Link, agent: Any, answer: Recovery | Exception) -> None:
        if agent is not link.agent:
            return
        if isinstance(answer, Exception):
            log.warning("node %s: recovering its tasks failed (%s); retrying", link.node, answer)
            self._retry_later(link)
            return
        link.answered()
        for chunk in answer.chunks:
            self._apply_chunk(chunk)
        if self._recovered is not None:
            self._take_over(answer.statuses)
        else:
            self._resync(link, answer.statuses)
        link.ack = 0
        link.ready = True
        self._poll_at(link, time.monotonic())

    def _retry_later(self, link: _Link) -> None:
        """Ask the agent again after AGENT_RETRY_INTERVAL, unless something else did first."""
        retry_at = link.retry_at = time.monotonic() + AGENT_RETRY_INTERVAL

        def retry() -> None:
            if link.retry_at == retry_at:
                self._ask_info(link)

        self._at(retry_at, retry)

    def _take_over(self, statuses: tuple[TaskStatus, ...]) -> None:
        """At a control-plane start: the controller decides about every attempt found."""
        assert self._recovered is not None
        for status in statuses:
            self._recovered.append(status)
            if status.phase is TaskPhase.FINISHED:
                self._mirror.complete(status.key)
            else:
                self._mirror.start(status.key)
                grace = status.stop_grace_seconds
                self._add_attempt(
                    status.key,
                    _Attempt(
                        status.node,
                        self._config.stop_grace_seconds if grace is None else grace,
                        status.started_at,
                    ),
                )

    def _resync(self, link: _Link, statuses: tuple[TaskStatus, ...]) -> None:
        """After the agent restarted or the node rejoined: report what changed meanwhile, end
        what the agent lost, and stop what nobody wants any more."""
        found = {status.key: status for status in statuses}
        for key in sorted(self._on_node[link.node]):
            attempt = self._live[key]
            status = found.get(key)
            if status is None:
                self._finish(key, ExitCode.POD_EXTERNAL_DELETED, "its node's agent lost it")
            elif status.phase is TaskPhase.FINISHED and status.result is not None:
                self._report_finished(key, status.result)
            elif status.phase is TaskPhase.RUNNING and attempt.started_at is None:
                self._report_started(key, status.started_at or utc_now())
        for status in statuses:
            if status.key not in self._live and status.phase is not TaskPhase.FINISHED:
                log.warning(
                    "task %s on node %s belongs to no running job; stopping it",
                    status.key,
                    link.node,
                )
                reason = KillReason.ATTEMPT_COMPLETED
                self._fleet.call(link.agent, "kill", (status.key, reason), self._ignore)

    # -- what agents report -----------------------------------------------------------------------

    def _poll_at(self, link: _Link, when: float) -> None:
        """Send the agent its next poll at `when`, unless it left or restarted meanwhile."""
        agent, incarnation = link.agent, link.incarnation

        def poll() -> None:
            if agent is not link.agent or incarnation != link.incarnation:
                return
            if link.ready and not link.polling:
                link.polling = True
                link.poll_sent = time.monotonic()
                self._expect_answer(link, link.poll_sent + self._poll_wait + self._poll_timeout)
                on_report = self._on_report(link, incarnation)
                self._fleet.call(agent, "poll", (link.ack, self._poll_wait), on_report)

        self._at(when, poll)

    def _on_report(
        self, link: _Link, incarnation: str | None
    ) -> Callable[[Report | Exception], None]:
        agent = link.agent

        def apply(answer: Report | Exception) -> None:
            if agent is not link.agent or incarnation != link.incarnation:
                return
            link.polling = False
            if isinstance(answer, Exception):
                log.info("node %s: polling its agent failed (%s); asking again", link.node, answer)
                self._ask_info(link)
                return
            link.answered()
            if answer.incarnation != link.incarnation:
                log.warning("node %s: its agent restarted; recovering its tasks", link.node)
                self._ask_info(link)
                return
            link.disk_problem = answer.disk_problem
            for number, item in answer.items:
                if isinstance(item, LogChunk):
                    self._apply_chunk(item)
                else:
                    self._apply_event(item)
                link.ack = number
            if answer.usage is not None:
                self._usage = [*self._usage[-USAGE_KEPT:], answer.usage]
            self._poll_at(link, max(time.monotonic(), link.poll_sent + self._poll_interval))

        return apply

    def _apply_chunk(self, chunk: LogChunk) -> None:
        if self._mirror.knows(chunk.key):
            self._mirror.append(chunk.key, chunk.stream, chunk.data)

    def _apply_event(self, event: TaskEvent) -> None:
        attempt = self._live.get(event.key)
        if attempt is None:
            return
        if event.kind is TaskEventKind.PREPARING:
            self._events.append(event)
        elif event.kind is TaskEventKind.STARTED:
            self._report_started(event.key, event.at)
        elif event.result is not None:
            self._report_finished(event.key, event.result)

    def _add_attempt(self, key: str, attempt: _Attempt) -> None:
        self._live[key] = attempt
        self._on_node[attempt.node].add(key)

    def _launched(self, key: str, answer: object) -> None:
        """A launch the agent refused ends the attempt. One whose answer was lost (the agent
        died, the link broke) may have started the task: ending it would retry it beside a run
        that goes on, so the agent's recovery says whether it runs (see `_resync`)."""
        if not isinstance(answer, Exception) or key not in self._live:
            return
        node = self._live[key].node
        if isinstance(answer, ExecutorError):
            self._finish(
                key,
                ExitCode.POD_CREATION_TRANSIENT_ERROR,
                f"the task could not be started on node {node}: {answer}",
            )
            return
        log.warning("task %s: no answer to its launch on node %s (%s)", key, node, answer)
        link = self._links[node]
        if link.agent is not None and link.ready:
            self._ask_info(link)  # else a recovery or the node's departure is under way

    @staticmethod
    def _ignore(answer: object) -> None:
        if isinstance(answer, Exception):
            log.info("a call to an agent failed: %s", answer)

    # -- reporting to the controller --------------------------------------------------------------

    def _report_started(self, key: str, at: datetime) -> None:
        attempt = self._live[key]
        if attempt.started_at is None:
            attempt.started_at = at
            self._events.append(TaskEvent(key, TaskEventKind.STARTED, at))

    def _report_finished(self, key: str, result: TaskResult) -> None:
        if result.started_at is not None:
            self._report_started(key, result.started_at)
        attempt = self._live.pop(key)
        self._on_node[attempt.node].discard(key)
        self._mirror.complete(key)
        self._events.append(TaskEvent(key, TaskEventKind.FINISHED, result.finished_at, result))

    def _finish(self, key: str, code: int, message: str) -> None:
        """End an attempt that cannot report itself: with the code of the stop the controller
        asked for, if it did, else with `code`."""
        attempt = self._live[key]
        if attempt.kill_reason is not None:
            code = attempt.kill_reason.exit_code
        classification = self._exit_specs.current().for_code(code, diagnostics=(message,))
        now = utc_now()
        note = f"{now.isoformat(timespec='milliseconds')} [pai] {message}\n"
        self._mirror.append(key, LogStream.RUNTIME, note.encode())
        isolation = self.isolation_on(attempt.node)
        self._report_finished(key, TaskResult(classification, attempt.started_at, now, isolation))

    def _send_exit_spec(self, link: _Link) -> None:
        """Nodes classify exits with the administrator's rules too: send them when changed."""
        path = self._exit_specs.admin_path
        text = path.read_text(encoding="utf-8") if path is not None and path.exists() else None
        if link.exit_spec_sent != (text,):
            self._fleet.call(link.agent, "set_exit_spec", (text,), self._ignore)
            link.exit_spec_sent = (text,)
