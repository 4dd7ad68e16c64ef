"""Hollow nodes: their agents answer the calls a Ray node's agent answers, in this process, and
their tasks last and end as their commands say; silent nodes miss calls and fence their tasks;
a poll without news is held until there is some or its wait has passed. And the control plane's
side (`HollowExecutor`) follows them as it follows Ray nodes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pai.cluster.model import ClusterConfig
from pai.executors.agents.executor import DEFAULT_NODE_TIMEOUT, AgentExecutor
from pai.executors.agents.fleet import Handler
from pai.executors.agents.wire import LogChunk, Recovery, Report
from pai.executors.base import (
    KillReason,
    LogStream,
    NodeCondition,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
)
from pai.executors.hollow.agent import HollowAgent
from pai.executors.hollow.cluster import hollow_cluster
from pai.executors.hollow.executor import HollowExecutor
from pai.executors.hollow.fleet import HollowFleet, HollowNodeSilent
from pai.executors.hollow.plan import TaskPlan, plan_of
from pai.runtime.classification import ExitCode
from pai.runtime.plugins import build_task_script

WAIT_SECONDS = 10.0


def script(*commands: str) -> str:
    return build_task_script(list(commands), [])


def launch(key: str, commands: str, node: str = "hollow-00001") -> TaskLaunch:
    return TaskLaunch(
        key=key,
        job="alice~job",
        role="worker",
        index=0,
        job_attempt=0,
        task_attempt=0,
        node=node,
        address="10.64.0.1",
        script=script(commands),
        env={},
        working_dir=Path("/nonexistent/work"),
        log_dir=Path("/nonexistent/logs"),
        stop_grace_seconds=0,
    )


def ask(fleet: HollowFleet, agent: HollowAgent, method: str, *args: Any) -> Any:
    """One call through the fleet, as the control plane makes it, and its answer."""
    answers: list[Any] = []
    fleet.call(agent, method, args, answers.append)
    deadline = time.monotonic() + WAIT_SECONDS
    while not answers and time.monotonic() < deadline:
        for handler, answer in fleet.answers(0.05):
            handler(answer)
    assert answers, f"{method} was not answered"
    return answers[0]


def events(report: Report) -> list[TaskEvent]:
    return [item for _, item in report.items if isinstance(item, TaskEvent)]


def wait_finished(fleet: HollowFleet, agent: HollowAgent, key: str) -> TaskEvent:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for event in events(ask(fleet, agent, "poll", 0)):
            if event.key == key and event.kind is TaskEventKind.FINISHED:
                return event
        time.sleep(0.02)
    raise AssertionError(f"task {key} did not finish")


@pytest.fixture
def fleet() -> HollowFleet:
    return HollowFleet(hollow_cluster(3), node_timeout=30.0)


def agent_of(fleet: HollowFleet, node: str = "hollow-00001") -> HollowAgent:
    return fleet.start_agent(node, fleet.members()[node].instance or "")


@pytest.mark.parametrize(
    ("commands", "plan"),
    [
        ("sleep 2; exit 3", TaskPlan(2.0, 3)),
        ("python train.py && sleep 1.5m\nexit 7", TaskPlan(90.0, 7)),
        ("sleep 2h", TaskPlan(7200.0, 0)),
        ("sleep 1d; exit 300", TaskPlan(86400.0, 44)),
        ("sleep .25", TaskPlan(0.25, 0)),
        ("sleep infinity; exit 1", TaskPlan(None, 1)),
        ("python train.py", TaskPlan(None, 0)),
        ("exit 2; sleep 3", TaskPlan(3.0, 0)),
        ("cat /tmp/asleep 5", TaskPlan(None, 0)),
    ],
)
def test_a_task_lasts_as_its_first_sleep_and_ends_with_its_trailing_exit(
    commands: str, plan: TaskPlan
) -> None:
    assert plan_of(script(commands)) == plan


def test_the_cluster_names_and_addresses_nodes_in_racks_of_twenty() -> None:
    cluster = hollow_cluster(45, gpus=4, cpus=32, memory_gb=256)
    names = [node.name for node in cluster.nodes]
    assert names[0] == "hollow-00001" and names[-1] == "hollow-00045"
    addresses = {node.name: node.address for node in cluster.nodes}
    assert addresses["hollow-00020"] == "10.64.0.20"
    assert addresses["hollow-00021"] == "10.64.1.1"
    assert addresses["hollow-00045"] == "10.64.2.5"
    sku = cluster.sku_types[cluster.nodes[0].sku_type]
    assert (sku.gpu, sku.cpu, sku.memory_mb) == (1, 8, 64 * 1024)
    assert all(len(node.leaf_indices) == 4 for node in cluster.nodes)
    assert set(cluster.virtual_clusters) == {"default"}
    with pytest.raises(ValueError, match="--hollow-cpus"):
        hollow_cluster(2, gpus=8, cpus=4)


def test_a_task_runs_at_once_and_ends_with_its_exit_code_after_its_sleep(
    fleet: HollowFleet,
) -> None:
    agent = agent_of(fleet)
    assert ask(fleet, agent, "info").isolation == "hollow"
    started = time.monotonic()
    assert ask(fleet, agent, "launch", launch("t1", "sleep 0.3; exit 3")) is None
    report = ask(fleet, agent, "poll", 0)
    assert [event.kind for event in events(report)] == [TaskEventKind.STARTED]
    notes = [item for _, item in report.items if isinstance(item, LogChunk)]
    assert notes[0].stream is LogStream.RUNTIME and b"for 0.3 s, then exits with 3" in notes[0].data
    finished = wait_finished(fleet, agent, "t1")
    assert time.monotonic() - started >= 0.3
    assert finished.result is not None
    assert finished.result.classification.origin_exit_code == 3
    assert finished.result.exit_code == ExitCode.RUNTIME_UNKNOWN_FAILED
    assert finished.result.isolation == "hollow"


def test_a_task_without_sleep_runs_until_stopped(fleet: HollowFleet) -> None:
    agent = agent_of(fleet)
    ask(fleet, agent, "launch", launch("forever", "python train.py"))
    time.sleep(0.2)
    assert [event.kind for event in events(ask(fleet, agent, "poll", 0))] == [TaskEventKind.STARTED]
    ask(fleet, agent, "kill", "forever", KillReason.STOP_REQUESTED)
    finished = wait_finished(fleet, agent, "forever")
    assert finished.result is not None
    assert finished.result.exit_code == ExitCode.STOP_FRAMEWORK_REQUESTED
    assert isinstance(ask(fleet, agent, "launch", launch("forever", "sleep 1")), Exception)


def test_a_report_comes_again_until_acknowledged_and_an_acknowledged_end_is_forgotten(
    fleet: HollowFleet,
) -> None:
    agent = agent_of(fleet)
    ask(fleet, agent, "launch", launch("quick", "sleep 0.05"))
    ask(fleet, agent, "launch", launch("long", "sleep 60"))
    wait_finished(fleet, agent, "quick")
    first = ask(fleet, agent, "poll", 0)
    assert ask(fleet, agent, "poll", 0).items == first.items  # not acknowledged: sent again
    last = first.items[-1][0]
    assert ask(fleet, agent, "poll", last).items == ()
    recovery: Recovery = ask(fleet, agent, "recover", {})
    assert [(status.key, status.phase) for status in recovery.statuses] == [
        ("long", TaskPhase.RUNNING)
    ]


def test_recover_reports_ended_tasks_once_and_running_ones_always(fleet: HollowFleet) -> None:
    agent = agent_of(fleet)
    ask(fleet, agent, "launch", launch("quick", "sleep 0.05; exit 1"))
    ask(fleet, agent, "launch", launch("long", "sleep 60"))
    wait_finished(fleet, agent, "quick")
    recovery: Recovery = ask(fleet, agent, "recover", {})
    found = {status.key: status for status in recovery.statuses}
    assert found["quick"].phase is TaskPhase.FINISHED and found["quick"].result is not None
    assert found["quick"].result.classification.origin_exit_code == 1
    assert found["long"].phase is TaskPhase.RUNNING and found["long"].stop_grace_seconds == 0
    again: Recovery = ask(fleet, agent, "recover", {})
    assert [status.key for status in again.statuses] == ["long"]
    assert ask(fleet, agent, "poll", 0).items == ()  # a recovery starts the reports over


def test_a_silent_node_misses_calls_fences_its_tasks_and_answers_again() -> None:
    fleet = HollowFleet(hollow_cluster(2), node_timeout=0.3, loss=0.5, loss_every=0.8, seed=7)
    agents = {node: agent_of(fleet, node) for node in fleet.members()}
    for node, agent in agents.items():
        ask(fleet, agent, "launch", launch(f"on-{node}", "sleep infinity", node))
    deadline = time.monotonic() + WAIT_SECONDS
    while not fleet.silent_nodes() and time.monotonic() < deadline:
        fleet.answers(0.05)
    (silent,) = fleet.silent_nodes()
    (other,) = set(agents) - {silent}
    missed: list[Any] = []
    fleet.call(agents[silent], "poll", (0,), missed.append)
    assert events(ask(fleet, agents[other], "poll", 0))[0].kind is TaskEventKind.STARTED
    assert missed == []  # the silent node's call is not answered meanwhile
    while silent in fleet.silent_nodes() and time.monotonic() < deadline:
        for handler, answer in fleet.answers(0.05):
            handler(answer)
    assert len(missed) == 1 and isinstance(missed[0], HollowNodeSilent)
    recovery: Recovery = ask(fleet, agents[silent], "recover", {})
    (fenced,) = recovery.statuses
    assert fenced.phase is TaskPhase.FINISHED and fenced.result is not None
    assert fenced.result.exit_code == ExitCode.POD_NODE_LOST


def test_the_control_plane_follows_hollow_nodes_as_it_follows_ray_nodes(tmp_path: Path) -> None:
    cluster = hollow_cluster(3)
    executor = HollowExecutor(cluster, tmp_path, store_id="store", poll_interval=0.02)
    try:
        assert executor.recover() == []
        states = executor.node_states()
        assert {state.condition for state in states.values()} == {NodeCondition.ALIVE}
        executor.launch(launch("ends", "sleep 0.2; exit 4", "hollow-00002"))
        seen: list[TaskEvent] = []
        deadline = time.monotonic() + WAIT_SECONDS
        while len(seen) < 2 and time.monotonic() < deadline:
            seen += executor.events()
            time.sleep(0.02)
        assert [event.kind for event in seen] == [TaskEventKind.STARTED, TaskEventKind.FINISHED]
        result = seen[1].result
        assert result is not None and result.classification.origin_exit_code == 4
        assert b"hollow node hollow-00002" in executor.logs("ends", LogStream.RUNTIME)
        assert executor.isolation_on("hollow-00002") == "hollow"
    finally:
        executor.close()


def pump(fleet: HollowFleet, seconds: float, until: list[Any] | None = None) -> None:
    """Collect the fleet's answers for `seconds`, or until `until` has something."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until:
        for handler, answer in fleet.answers(0.05):
            handler(answer)


def test_a_poll_without_news_is_held_and_answered_when_a_task_ends(fleet: HollowFleet) -> None:
    agent = agent_of(fleet)
    ask(fleet, agent, "launch", launch("short", "sleep 1; exit 2"))
    last = ask(fleet, agent, "poll", 0).items[-1][0]
    held: list[Report] = []
    asked = time.monotonic()
    fleet.call(agent, "poll", (last, 60.0), held.append)
    pump(fleet, 0.3)
    assert held == []  # nothing new while the task runs: the poll is held
    pump(fleet, WAIT_SECONDS, until=held)
    assert time.monotonic() - asked < WAIT_SECONDS  # answered by the end, not by the wait
    (ended,) = events(held[0])
    assert ended.kind is TaskEventKind.FINISHED and ended.key == "short"


def test_a_held_poll_is_answered_empty_once_its_wait_has_passed(fleet: HollowFleet) -> None:
    agent = agent_of(fleet)
    held: list[Report] = []
    asked = time.monotonic()
    fleet.call(agent, "poll", (0, 0.5), held.append)
    pump(fleet, WAIT_SECONDS, until=held)
    assert time.monotonic() - asked >= 0.5
    assert held[0].items == ()


def test_a_held_poll_is_not_silence_but_a_node_silent_beyond_the_wait_is_unreachable(
    tmp_path: Path,
) -> None:
    # The only node goes silent after 3 s, and for good (every rotation draws it again).
    cluster = hollow_cluster(1)
    executor = HollowExecutor(
        cluster,
        tmp_path,
        store_id="store",
        loss=1.0,
        loss_every=3.0,
        poll_wait=1.0,
        poll_timeout=0.5,
    )
    try:
        executor.recover()
        started = time.monotonic()
        while time.monotonic() - started < 2.0:  # polls held longer than poll_timeout
            (state,) = executor.node_states().values()
            assert state.condition is NodeCondition.ALIVE
            time.sleep(0.1)
        deadline = time.monotonic() + WAIT_SECONDS
        while state.condition is NodeCondition.ALIVE and time.monotonic() < deadline:
            time.sleep(0.1)
            (state,) = executor.node_states().values()
        assert state.condition is NodeCondition.UNREACHABLE
        assert state.message.startswith("unreachable since")
    finally:
        executor.close()


class LaunchAnswersLost(HollowFleet):
    """Hollow nodes whose answers to launches are lost on the way back, as when an agent dies
    just after a launch: `delivered` says whether the launch itself reached the agent. A double
    of the link, not of the agent: no real agent can be killed between starting a task and
    answering at a chosen moment."""

    def __init__(self, cluster: ClusterConfig, *, delivered: bool) -> None:
        super().__init__(cluster, node_timeout=DEFAULT_NODE_TIMEOUT)
        self._delivered = delivered

    def call(self, agent: Any, method: str, args: tuple[Any, ...], on_answer: Handler) -> None:
        if method != "launch":
            super().call(agent, method, args, on_answer)
            return
        lost = ConnectionError("the agent died before it answered")
        if self._delivered:
            super().call(agent, method, args, lambda _: on_answer(lost))
        else:
            on_answer(lost)


def events_until(executor: AgentExecutor, kind: TaskEventKind) -> list[TaskEvent]:
    seen: list[TaskEvent] = []
    deadline = time.monotonic() + WAIT_SECONDS
    while not any(event.kind is kind for event in seen) and time.monotonic() < deadline:
        seen += executor.events()
        time.sleep(0.02)
    return seen


@pytest.mark.parametrize("delivered", [True, False], ids=["started", "never-arrived"])
def test_a_launch_whose_answer_was_lost_is_ended_only_if_the_agent_does_not_run_it(
    tmp_path: Path, delivered: bool
) -> None:
    fleet = LaunchAnswersLost(hollow_cluster(1), delivered=delivered)
    executor = AgentExecutor(
        hollow_cluster(1),
        tmp_path,
        fleet,
        node_dir=tmp_path / "nodes",
        store_id="store",
        poll_interval=0.02,
    )
    try:
        executor.recover()
        executor.launch(launch("unanswered", "sleep 1; exit 3"))
        seen = events_until(executor, TaskEventKind.FINISHED)
    finally:
        executor.close()

    [finished] = [event for event in seen if event.kind is TaskEventKind.FINISHED]
    assert finished.result is not None
    if delivered:  # it ran to its own end; no retry was started beside it
        assert finished.result.classification.origin_exit_code == 3
        assert TaskEventKind.STARTED in {event.kind for event in seen}
    else:  # the agent never had it: retried for free
        assert finished.result.exit_code == ExitCode.POD_EXTERNAL_DELETED
