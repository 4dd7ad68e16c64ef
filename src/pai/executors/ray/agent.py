"""The agent of one node: a detached Ray actor, pinned to its node, that runs the node's tasks.

It runs them as the local executor does on one machine, each under PAI's supervisor, with two
differences. Supervisors start detached: Ray kills a worker's child processes when the worker
exits, and a task must outlive a restart of its agent. And each supervisor has the node's raylet
as its lifeline: when the raylet ends, the node has left the cluster, PAI retries its tasks
elsewhere, and they must not go on here.

The control plane pulls everything else with `poll(ack, wait)`: the events and log output of
the node's tasks, numbered, a task's output after its start and before its end. A poll with
nothing to report is held for up to `wait` seconds, the agent looking for news every
NEWS_CHECK_INTERVAL (or at once after a launch), so news leaves as it happens while an idle node
answers once per `wait`; Ray runs polls in a concurrency group of their own (see `.executor`),
so a held poll keeps no launch or stop waiting. A recovery ends a held poll at once: it is the
previous control plane's, and the next one's poll would wait behind it. What a reply carried
is dropped only once the next poll acknowledges it, so a reply lost on the way is sent again:
nothing is lost or applied twice. New output is read only when everything before it was
acknowledged, so an agent that nobody polls holds no more than one reply's worth. This module
does not import Ray: the control plane turns the class into an actor (see `.executor`); what
it answers is in `pai.executors.agents.wire`.

Fencing: the agent notes when the control plane last reached it. Once that is longer ago than
the node timeout (a cut network, or a control plane down that long), it stops its tasks as a
stop request would (SIGTERM, the task's grace period, SIGKILL): the control plane gives them up
only after that timeout and the grace period have passed, so a retry elsewhere never runs beside
a run that goes on behind a cut network. Its state lives under a directory of the store it
serves (`<node dir>/<store id>/<node>`), so another store's tasks are never its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from pai import __version__
from pai.executors.agents.wire import AgentInfo, Item, LogChunk, Recovery, Report
from pai.executors.base import (
    KillReason,
    LogStream,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
)
from pai.executors.local import LocalExecutor
from pai.executors.node.logfiles import LogReader, previous_segment
from pai.executors.node.taskfiles import ProcessIdentity, SupervisorConfig
from pai.runtime.exitspec import ExitSpecSource

log = logging.getLogger(__name__)

EXIT_SPEC_FILE = "exit-spec.yaml"
NEWS_CHECK_INTERVAL = 0.1
"""How often a held poll looks for news (the tasks' events and output)."""
FENCE_CHECK_INTERVAL = 0.5
"""How often the agent looks whether the control plane has been away too long."""
MIB = 1024 * 1024
LIVE_READ_BYTES = MIB
"""How much of one running task's stream one poll reads: a task that writes faster than this
is followed at this rate (its node keeps the newest output, up to the log cap)."""
REPLY_BYTES = 4 * MIB
"""About the most log data one reply carries; the rest follows in the next ones."""
RESUME_NOTE = (
    "[pai] the control plane restarted while this task ran, after its log had rotated: "
    "output written meanwhile may be missing here from this point\n"
)


class NodeAgent:
    """Runs one node's tasks; every method is called by the control plane through Ray."""

    def __init__(
        self,
        node: str,
        node_dir: str,
        supervisor: dict[str, Any],
        usage_interval: float,
        node_timeout: float,
    ) -> None:
        """`node_dir`: this store's directory on the node (`<node dir>/<store id>`);
        `node_timeout`: how long without the control plane before the tasks are stopped."""
        self._root = Path(node_dir).expanduser() / node
        self._node = node
        self._exit_spec_path = self._root / EXIT_SPEC_FILE
        raylet = ProcessIdentity.of(os.getppid())  # Ray starts its workers from the raylet
        config = replace(SupervisorConfig.from_dict(supervisor), lifeline=raylet, detach=True)
        self._executor = LocalExecutor(
            self._root / "executor",
            jobs_dir=self._root / "jobs",
            config=config,
            exit_specs=ExitSpecSource(self._exit_spec_path),
            machine=node,
        )
        self._usage_interval = usage_interval
        self._next_usage = 0.0
        self._incarnation = uuid.uuid4().hex
        self._outbox: list[tuple[int, Item]] = []
        self._last_number = 0
        self._readers: dict[str, dict[LogStream, LogReader]] = {}
        # The fence runs in a thread of its own while Ray calls the methods, and polls in a
        # concurrency group of their own: all take the lock (a held poll leaves it meanwhile).
        self._lock = threading.Lock()
        self._news = threading.Condition(self._lock)
        self._recoveries = 0  # a poll held across a recovery ends
        self._node_timeout = node_timeout
        self._last_contact = time.monotonic()
        self._fenced: set[str] = set()
        # A restarted agent fences the tasks it finds too, before any control plane recovers it.
        self._found = {
            status.key
            for status in self._executor.recover()
            if status.phase is not TaskPhase.FINISHED
        }
        threading.Thread(target=self._fence, name="pai-agent-fence", daemon=True).start()

    def info(self) -> AgentInfo:
        self._reached()
        isolation = self._executor.node_isolation
        return AgentInfo(
            self._node,
            self._incarnation,
            __version__,
            str(self._root),
            isolation.mode,
            isolation.problem,
        )

    def set_exit_spec(self, text: str | None) -> None:
        """The administrator's additions to the exit spec, used by the tasks started after."""
        if text is None:
            self._exit_spec_path.unlink(missing_ok=True)
            return
        temporary = self._exit_spec_path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, self._exit_spec_path)

    def launch(self, task: TaskLaunch) -> None:
        with self._lock:
            self._reached()
            self._executor.launch(task)
            self._follow(task.key, {})
            self._news.notify_all()

    def kill(self, key: str, reason: KillReason) -> None:
        self._reached()
        self._executor.kill(key, reason)

    def poll(self, ack: int, wait: float = 0.0) -> Report:
        """What happened since the last acknowledged reply (`ack`: its last number); when
        nothing did, as soon as something does, or after `wait` seconds with nothing."""
        deadline = time.monotonic() + wait
        with self._news:
            recoveries = self._recoveries
            self._reached()
            self._outbox = [(number, item) for number, item in self._outbox if number > ack]
            while True:
                if not self._outbox:
                    self._gather()
                left = deadline - time.monotonic()
                if self._outbox or left <= 0 or self._recoveries != recoveries:
                    return self._report()
                self._news.wait(min(NEWS_CHECK_INTERVAL, left))

    def _report(self) -> Report:
        reply: list[tuple[int, Item]] = []
        size = 0
        for number, item in self._outbox:
            if reply and size >= REPLY_BYTES:
                break
            reply.append((number, item))
            size += len(item.data) if isinstance(item, LogChunk) else 0
        usage = None
        if time.monotonic() >= self._next_usage:
            self._next_usage = time.monotonic() + self._usage_interval
            usage = self._executor.usage()
        return Report(self._incarnation, tuple(reply), usage, self._executor.node_problem())

    def recover(self, resume: dict[str, dict[str, int | None]]) -> Recovery:
        """Start over with a control plane that (re)connects: every task attempt of the node,
        and the output of each attempt in `resume` from where the control plane's copy ends
        (bytes into each stream's current segment, None when that copy has rotated)."""
        with self._lock:
            self._reached()
            self._recoveries += 1
            self._news.notify_all()
            return self._recover(resume)

    def _recover(self, resume: dict[str, dict[str, int | None]]) -> Recovery:
        self._outbox.clear()
        for readers in self._readers.values():
            for reader in readers.values():
                reader.close()
        self._readers.clear()
        statuses = tuple(self._executor.recover())
        chunks: list[LogChunk] = []
        for status in statuses:
            if status.key not in resume and status.phase is TaskPhase.FINISHED:
                continue
            self._follow(status.key, resume.get(status.key, {}))
            if status.phase is TaskPhase.FINISHED:
                chunks += self._drain(status.key)
        return Recovery(statuses, tuple(chunks))

    # -- internals --------------------------------------------------------------------------------

    def _reached(self) -> None:
        self._last_contact = time.monotonic()
        self._fenced.clear()

    def _fence(self) -> None:
        """Stop the node's tasks once the control plane has been away for the node timeout."""
        while True:
            time.sleep(FENCE_CHECK_INTERVAL)
            away = time.monotonic() - self._last_contact
            if away <= self._node_timeout:
                continue
            with self._lock:
                running = sorted((set(self._readers) | self._found) - self._fenced)
                self._fenced.update(running)
            for key in running:
                log.warning(
                    "node %s: no word from PAI's control plane for %.1f s (more than the node "
                    "timeout, %g s): stopping task %s, which PAI retries elsewhere",
                    self._node,
                    away,
                    self._node_timeout,
                    key,
                )
                try:
                    self._executor.kill(key, KillReason.FENCED)
                except Exception:  # one task's trouble must not keep the others running
                    log.exception("node %s: stopping task %s failed", self._node, key)

    def _follow(self, key: str, starts: dict[str, int | None]) -> None:
        readers = {}
        for stream in LogStream:
            path = self._executor.log_path(key, stream)
            start = starts.get(stream.value, 0)
            if start is None or (start > 0 and previous_segment(path).exists()):
                # The copy's end cannot be found in a rotated log: go on from the log's end and
                # say so in the copy (not in the task's own log).
                start = None
                self._number(LogChunk(key, stream, RESUME_NOTE.encode()))
            readers[stream] = LogReader(path, start=start)
        self._readers[key] = readers

    def _gather(self) -> None:
        """A task's start, then its output, then its end."""
        events = self._executor.events()
        for event in events:
            if event.kind is not TaskEventKind.FINISHED:
                self._number(event)
        ended = {event.key for event in events if event.kind is TaskEventKind.FINISHED}
        for key in list(self._readers):
            if key in ended:
                for chunk in self._drain(key):
                    self._number(chunk)
                continue
            for stream, reader in self._readers[key].items():
                data = reader.read(LIVE_READ_BYTES)
                if data:
                    self._number(LogChunk(key, stream, data))
        for event in events:
            if event.kind is TaskEventKind.FINISHED:
                self._number(event)

    def _drain(self, key: str) -> list[LogChunk]:
        """The rest of an ended task's output; it stops being followed."""
        chunks = []
        for stream, reader in self._readers.pop(key, {}).items():
            while data := reader.read(MIB):
                chunks.append(LogChunk(key, stream, data))
            reader.close()
        return chunks

    def _number(self, item: Item) -> None:
        self._last_number += 1
        self._outbox.append((self._last_number, item))
