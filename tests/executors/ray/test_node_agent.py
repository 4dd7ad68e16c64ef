"""The node agent's side of the Ray engine, run in this process (Ray only carries its calls).

What the control plane relies on: output arrives in order, before the event that ends its task;
a reply that was not acknowledged is sent again unchanged; and after a reconnection the output
resumes where the control plane's copy ends, with nothing repeated or lost. A poll without news
is held until there is some, or its wait has passed, and keeps no launch waiting. And what keeps a
retry elsewhere from overlapping a run behind a cut network: an agent without the control plane
for its node timeout stops its tasks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pai.diskfloor import DiskFloor
from pai.executors.agents.wire import Report
from pai.executors.base import (
    KillReason,
    LogStream,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
)
from pai.executors.local import kill_processes_under
from pai.executors.node.taskfiles import SupervisorConfig
from pai.executors.ray.agent import LogChunk, NodeAgent

CONFIG = SupervisorConfig(stop_grace_seconds=1.0, poll_interval=0.05)
WAIT = 30.0


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[NodeAgent]:
    yield NodeAgent(
        "node1", str(tmp_path / "nodes"), CONFIG.to_dict(), usage_interval=3600, node_timeout=3600
    )
    kill_processes_under(tmp_path)


def launch(agent: NodeAgent, tmp_path: Path, key: str, script: str) -> None:
    attempt = tmp_path / "nodes" / "node1" / "jobs" / "alice~job" / key
    agent.launch(
        TaskLaunch(
            key=key,
            job="alice~job",
            role="main",
            index=0,
            job_attempt=0,
            task_attempt=0,
            node="node1",
            address="127.0.0.1",
            script=script,
            env={},
            working_dir=attempt / "work",
            log_dir=attempt / "logs",
        )
    )


class ControlPlane:
    """Polls the agent as the executor does, acknowledging what it applied."""

    def __init__(self, agent: NodeAgent) -> None:
        self.agent = agent
        self.ack = 0
        self.items: list[LogChunk | TaskEvent] = []

    def poll(self, wait: float = 0.0) -> Report:
        report = self.agent.poll(self.ack, wait)
        for number, item in report.items:
            self.items.append(item)
            self.ack = number
        return report

    def until(self, done: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not done():
            assert time.monotonic() < deadline, what
            self.poll()
            time.sleep(0.05)

    def output(self, key: str, stream: LogStream = LogStream.STDOUT) -> bytes:
        return b"".join(
            item.data
            for item in self.items
            if isinstance(item, LogChunk) and item.key == key and item.stream is stream
        )

    def finished(self, key: str) -> bool:
        return self.has_event(key, TaskEventKind.FINISHED)

    def has_event(self, key: str, kind: TaskEventKind) -> bool:
        return any(
            isinstance(item, TaskEvent) and item.key == key and item.kind is kind
            for item in self.items
        )


def test_output_arrives_in_order_before_the_event_that_ends_the_task(
    agent: NodeAgent, tmp_path: Path
) -> None:
    launch(agent, tmp_path, "k1", "for i in 1 2 3; do echo line $i; sleep 0.1; done\nexit 3")
    control = ControlPlane(agent)

    control.until(lambda: control.finished("k1"), "the task ends")

    assert control.output("k1") == b"line 1\nline 2\nline 3\n"
    last_chunk = max(i for i, item in enumerate(control.items) if isinstance(item, LogChunk))
    [ended] = [item for item in control.items if isinstance(item, TaskEvent) and item.result]
    assert control.items.index(ended) > last_chunk
    assert ended.result is not None and ended.result.classification.origin_exit_code == 3


def test_a_reply_that_was_not_acknowledged_is_sent_again_unchanged(
    agent: NodeAgent, tmp_path: Path
) -> None:
    launch(agent, tmp_path, "k1", "echo one\nsleep 0.3\necho two")
    control = ControlPlane(agent)
    control.until(lambda: control.output("k1"), "some output")
    time.sleep(0.5)  # "two" is written now, but the last reply is not acknowledged yet

    lost = agent.poll(control.ack - 1)
    again = agent.poll(control.ack - 1)

    assert lost == again
    assert [item for _, item in lost.items] == control.items[-len(lost.items) :]


def test_a_reconnecting_control_plane_resumes_where_its_copy_ends(
    agent: NodeAgent, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    launch(
        agent, tmp_path, "k1", f"echo before\nwhile [ ! -e {go} ]; do sleep 0.05; done\necho after"
    )
    launch(agent, tmp_path, "k2", "echo all of it")
    first = ControlPlane(agent)
    first.until(lambda: first.output("k1") == b"before\n", "the first line")
    ended = tmp_path / "nodes" / "node1" / "executor" / "tasks" / "k2" / "result.json"
    deadline = time.monotonic() + WAIT
    while not ended.exists():  # k2 ends, unseen: the first control plane dies here
        assert time.monotonic() < deadline, "k2 ends"
        time.sleep(0.05)
    copied = len(first.output("k1"))

    recovery = agent.recover({"k1": {"user-stdout": copied}, "k2": {}})
    go.touch()
    second = ControlPlane(agent)
    second.until(lambda: second.finished("k1"), "k1 ends")

    phases = {status.key: status.phase for status in recovery.statuses}
    assert phases == {"k1": TaskPhase.RUNNING, "k2": TaskPhase.FINISHED}
    assert second.output("k1") == b"after\n"
    rest_of_k2 = [chunk for chunk in recovery.chunks if chunk.stream is LogStream.STDOUT]
    assert [(chunk.key, chunk.data) for chunk in rest_of_k2] == [("k2", b"all of it\n")]


STUBBORN = "trap 'echo got SIGTERM; sleep 60' TERM\necho ready\nwhile true; do sleep 0.1; done"


def test_without_the_control_plane_for_the_node_timeout_the_tasks_are_stopped(
    tmp_path: Path,
) -> None:
    fenced = NodeAgent(
        "node1", str(tmp_path / "nodes"), CONFIG.to_dict(), usage_interval=3600, node_timeout=1.5
    )
    try:
        launch(fenced, tmp_path, "k1", STUBBORN)
        control = ControlPlane(fenced)
        control.until(lambda: control.output("k1") == b"ready\n", "the task runs")
        for _ in range(30):  # polled: no fence, however long that lasts
            control.poll()
            time.sleep(0.1)
        assert not control.finished("k1")

        result = tmp_path / "nodes" / "node1" / "executor" / "tasks" / "k1" / "result.json"
        cut = time.monotonic()
        deadline = cut + WAIT
        while not result.exists():  # nobody polls: as behind a cut network
            assert time.monotonic() < deadline, "the fenced task ends"
            time.sleep(0.05)
        stopped_after = time.monotonic() - cut
        control.until(lambda: control.finished("k1"), "its end is reported once polled again")
    finally:
        kill_processes_under(tmp_path)

    # Not before the timeout; SIGTERM, then SIGKILL after the grace period (1 s), long before
    # the trap's 60 s were over. When the control plane gives up is the e2e cut-link test's.
    assert 1.5 <= stopped_after < 10
    [ended] = [item for item in control.items if isinstance(item, TaskEvent) and item.result]
    assert ended.result is not None
    assert ended.result.classification.code == KillReason.FENCED.exit_code == -1001
    assert control.output("k1").startswith(b"ready\ngot SIGTERM\n")


def test_an_agent_that_restarts_behind_a_cut_network_stops_the_tasks_it_finds(
    agent: NodeAgent, tmp_path: Path
) -> None:
    launch(agent, tmp_path, "k1", STUBBORN)
    control = ControlPlane(agent)
    control.until(lambda: control.output("k1") == b"ready\n", "the task runs")

    NodeAgent(  # Ray restarts the agent; no control plane reaches the new one
        "node1", str(tmp_path / "nodes"), CONFIG.to_dict(), usage_interval=3600, node_timeout=1
    )
    result = tmp_path / "nodes" / "node1" / "executor" / "tasks" / "k1" / "result.json"
    deadline = time.monotonic() + WAIT
    while not result.exists():
        assert time.monotonic() < deadline, "the task found by the new agent is stopped"
        time.sleep(0.05)


def test_a_node_below_the_disk_floor_says_so_in_every_report(tmp_path: Path) -> None:
    full = SupervisorConfig(disk_floor=DiskFloor(share=None, size=2**62))  # more than any disk
    agent = NodeAgent(
        "node1", str(tmp_path / "nodes"), full.to_dict(), usage_interval=3600, node_timeout=3600
    )

    problem = agent.poll(0).disk_problem

    assert problem is not None and problem.startswith("node out of disk space")
    roomy = NodeAgent(
        "node2", str(tmp_path / "nodes"), CONFIG.to_dict(), usage_interval=3600, node_timeout=3600
    )
    assert roomy.poll(0).disk_problem is None


def test_a_held_poll_is_answered_as_soon_as_there_is_news(agent: NodeAgent, tmp_path: Path) -> None:
    launch(agent, tmp_path, "k1", "sleep 1")
    control = ControlPlane(agent)
    control.until(lambda: control.has_event("k1", TaskEventKind.STARTED), "the task starts")
    asked = time.monotonic()
    while not control.finished("k1"):
        assert control.poll(wait=WAIT).items  # each held poll ends with news, never empty
    assert time.monotonic() - asked < WAIT


def test_a_held_poll_without_news_is_answered_empty_after_its_wait(agent: NodeAgent) -> None:
    asked = time.monotonic()
    report = agent.poll(0, 0.5)
    assert report.items == ()
    assert time.monotonic() - asked >= 0.5


def test_a_held_poll_keeps_no_launch_waiting(agent: NodeAgent, tmp_path: Path) -> None:
    replies: list[Report] = []
    holder = threading.Thread(target=lambda: replies.append(agent.poll(0, WAIT)))
    holder.start()
    time.sleep(0.3)
    assert replies == []  # held: nothing has happened
    asked = time.monotonic()
    launch(agent, tmp_path, "k1", "sleep 5")
    holder.join(WAIT)
    assert time.monotonic() - asked < WAIT / 2  # the launch went ahead, and its news came back
    assert replies and {item.key for _, item in replies[0].items} == {"k1"}


def test_a_recovery_ends_a_held_poll_at_once(agent: NodeAgent) -> None:
    replies: list[Report] = []
    holder = threading.Thread(target=lambda: replies.append(agent.poll(0, WAIT)))
    holder.start()
    time.sleep(0.3)
    asked = time.monotonic()
    agent.recover({})  # a control plane that reconnects: the held poll was its predecessor's
    holder.join(WAIT)
    assert replies and replies[0].items == ()
    assert time.monotonic() - asked < WAIT / 2
