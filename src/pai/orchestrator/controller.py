"""The controller: the reconcile loop, and the only writer of job and task state.

API handlers record intents in the store (a new job row, a stop request) and wake the
controller. Each pass it takes intents in, applies what the executor reports, lets the
scheduler place waiting groups (in priority, then submission order), persists every change,
and only then starts or kills processes: a launch is recorded before it happens, so a crash
can never leave a task running that the store does not know about. After a restart the
scheduler is rebuilt from the stored allocations and the executor re-attaches to running tasks,
so nothing running is lost or started twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Integer, Row, bindparam, column, insert, select, update
from sqlalchemy.orm import Session

from pai.auth.sealing import SecretBox
from pai.cluster.model import ClusterConfig
from pai.executors.base import (
    Executor,
    KillReason,
    NodeCondition,
    NodeState,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
)
from pai.orchestrator import framework as fw
from pai.orchestrator.access import task_access
from pai.orchestrator.active import (
    ActiveJob,
    VcJobs,
    VcTally,
    allocation_from_dict,
    allocation_to_dict,
    task_key,
)
from pai.orchestrator.fairness import FairnessState, JobFairness
from pai.orchestrator.launching import assign_ports, build_launch
from pai.orchestrator.pacing import Pace
from pai.orchestrator.policy import job_policy
from pai.protocol import JobSpec
from pai.runtime.classification import Classification, ExitCode
from pai.runtime.exitspec import ExitSpecSource
from pai.runtime.interactive import TaskAccess
from pai.runtime.ports import PortAllocator, PortAssignment, PortsExhaustedError
from pai.scheduler.fairshare import DEFAULT_HALF_LIFE_S
from pai.scheduler.requests import RequestRefused, job_requests
from pai.scheduler.scheduler import Scheduler
from pai.scheduler.types import (
    OPPORTUNISTIC_PRIORITY,
    Allocation,
    Bind,
    ClusterSnapshot,
    Decision,
    GroupRequest,
    Placement,
    Preempt,
    Wait,
    WaitKind,
    WaitReason,
)
from pai.storage.access import Credentials
from pai.storage.jobs import JobStorages, TaskStorages
from pai.store import Database
from pai.store.failures import store_failure
from pai.store.models import JobEvent, JobRow, NodeCordon
from pai.store.recordsets import json_rows, rows_documents

log = logging.getLogger(__name__)

FINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED")
_KILL_REASONS = {reason.exit_code: reason for reason in KillReason}
LAUNCH_THREADS = 8
"""Launches of one pass run this many at a time, so a gang's tasks start together."""
VIEW_SHARE = 0.1
"""Of the controller's time, the most that refreshing the view API workers show may take
(`pacing`): at 5,000 nodes refreshing it after every pass took most of the controller's time."""


@dataclass(frozen=True)
class ControllerSettings:
    poll_interval: float = 0.1
    intent_check_interval: float = 1.0
    backoff: fw.Backoff = field(default_factory=fw.Backoff)
    batch_window: float = 0.05
    """The least time between two passes that take intents in: a wake sooner after the last
    one waits out the rest, so that a burst of submissions is taken in by one pass rather than
    by one pass each (every pass writes and schedules). A wake after a quiet spell acts at once."""
    launch_poll_interval: float = 0.005
    """How often the executor is asked for events while launched tasks have not yet reported
    their start (for at most `launch_watch` seconds after the last launch), so that a job is
    shown running as soon as its tasks run rather than up to `poll_interval` later."""
    launch_watch: float = 2.0
    """Beyond this, a task slow to start (a storage to mount) is looked for every
    `poll_interval` only, so that it does not keep the loop busy."""
    fair_share_half_life: float | None = DEFAULT_HALF_LIFE_S
    """Fair share between the users of a VC (`pai.orchestrator.fairness`); None: off."""


class SchedulingObserver(Protocol):
    """Told about scheduling as it happens (the monitor's metrics)."""

    def decided(self, seconds: float) -> None:
        """One job was considered for placement, taking `seconds`."""

    def placed(self, virtual_cluster: str, waited_seconds: float) -> None:
        """A group of a job of the VC was placed, `waited_seconds` after the job's submission."""

    def passed(self, seconds: float) -> None:
        """The controller ended a pass (intake, events, timers, scheduling, writes), taking
        `seconds`."""


class Controller:
    """Owns the scheduler and drives the executor; run it with `start()` / `stop()`."""

    observer: SchedulingObserver | None = None

    def __init__(
        self,
        database: Database,
        scheduler: Scheduler,
        executor: Executor,
        secret_box: SecretBox,
        settings: ControllerSettings,
        *,
        exit_specs: ExitSpecSource | None = None,
        ports: PortAllocator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.database = database
        self.scheduler = scheduler
        self.executor = executor
        self.settings = settings
        self._box = secret_box
        self._storages = JobStorages(database, Credentials(secret_box))
        self._exit_specs = exit_specs or ExitSpecSource()
        self._ports = ports or PortAllocator()
        self._clock = clock
        self._jobs: dict[int, ActiveJob] = {}
        # Jobs changed since they were last written, and the time each job's state machine next
        # has something to do: a pass works on what changed, not on every job in the queue.
        self._changed: dict[int, ActiveJob] = {}
        self._timers: dict[int, float] = {}
        self._tally = VcTally()
        self._fairness = JobFairness(
            scheduler.cluster, settings.fair_share_half_life, scheduler.reserves_after_s
        )
        self._fairness_state = self._fairness.state(clock())
        self._keys: dict[str, tuple[int, fw.TaskKey]] = {}  # executor key -> job id, task
        self._key_of: dict[tuple[int, fw.TaskKey], str] = {}  # the reverse, for live tasks
        self._owners: dict[str, ActiveJob] = {}  # scheduler group name -> job
        self._effects: list[Callable[[], None] | _Launch] = []
        self._starting: set[str] = set()  # executor keys launched, their start not yet reported
        self._watch_launches_until = 0.0  # time.monotonic() until which they are polled often
        self._last_intake = float("-inf")  # time.monotonic() of the last pass woken by intents
        self._launch_pool: ThreadPoolExecutor | None = None
        self._events: list[dict[str, Any]] = []  # rows of job_events, written by _persist
        self._late_exits: list[tuple[str, Classification]] = []
        self._schedule_needed = True  # cells may have been freed: every waiting job retries
        self._new_demand: set[int] = set()  # jobs that asked for cells since the last pass
        self._snapshot = scheduler.snapshot()
        self._vc_jobs: dict[str, VcJobs] = {}
        self._view_stale = False  # the view `snapshot()` and its kin show trails the last pass
        self._view_pace = Pace(VIEW_SHARE)
        self._node_states: dict[str, NodeState] = {}
        self._cordons: dict[str, NodeState] = {}
        self._node_names = {node.name for node in scheduler.cluster.nodes}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_intent_check = 0.0
        self.may_act: Callable[[], bool] = lambda: True
        """Whether this controller may act now (its term holds the controller lease)."""
        self._store_failing: str | None = None  # why the store took no writes, since it did not

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Recover what the store and the executor know, then run the loop in a thread."""
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="pai-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop (running tasks keep running; the next start re-attaches to them)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._launch_pool is not None:
            self._launch_pool.shutdown()
            self._launch_pool = None

    @property
    def running(self) -> bool:
        """Whether the loop runs (between `start()` and `stop()`)."""
        return self._thread is not None

    def wake(self) -> None:
        """Something was recorded for the controller (a submission, a stop): act on it now."""
        self._wake.set()

    @property
    def cluster(self) -> ClusterConfig:
        return self.scheduler.cluster

    @property
    def secret_box(self) -> SecretBox:
        """Seals the secrets of submitted jobs (API handlers) and opens them at launch."""
        return self._box

    @property
    def exit_specs(self) -> ExitSpecSource:
        """The exit spec in force, to explain exit codes (the administrator may extend it)."""
        return self._exit_specs

    def snapshot(self) -> ClusterSnapshot:
        """The scheduler's view after the last pass (safe to read from any thread)."""
        return self._snapshot

    def vc_jobs(self) -> dict[str, VcJobs]:
        """Running and waiting jobs per VC after the last pass."""
        return self._vc_jobs

    def fairness(self) -> FairnessState:
        """Each VC's users: what they hold against their limits, their recent use."""
        return self._fairness_state

    def node_states(self) -> Mapping[str, NodeState]:
        """Each node as the engine sees it, or cordoned (nodes left out are alive), after the
        last pass."""
        return self._node_states

    def _loop(self) -> None:
        while not self._stopping.is_set():
            woken = self._wake.wait(self._next_wait())
            if woken:
                batch_ends = self._last_intake + self.settings.batch_window
                self._stopping.wait(max(0.0, batch_ends - time.monotonic()))
                self._last_intake = time.monotonic()
            self._wake.clear()
            if not self.may_act():
                continue  # the lease is not (yet again) known to be held: decide nothing
            started = time.perf_counter()
            try:
                self.run_once(check_intents=woken)
            except Exception as error:  # a bug must not stop every job in the cluster
                self._on_failed_pass(error)
                time.sleep(1.0)
            else:
                if self.observer is not None:
                    self.observer.passed(time.perf_counter() - started)
                if self._store_failing is not None:
                    log.warning("the store takes writes again: the controller's decisions are in")
                    self._store_failing = None

    def _on_failed_pass(self, error: Exception) -> None:
        """A store that cannot be written (full disk) or reached (a restart) is said once; the
        pass's decisions stay in memory, and launches and stops wait for them to be written."""
        failure = store_failure(error)
        if failure is None:
            log.exception("controller pass failed; retrying")
        elif self._store_failing is None:
            self._store_failing = failure.message
            log.warning(
                "the store takes no writes (%s): the controller keeps its decisions in memory "
                "and writes them, then acts on them, once it can",
                error,
            )

    def _next_wait(self) -> float:
        """Until the next pass: the poll interval, or sooner when the view is due again."""
        if self._view_stale:
            return min(self._poll_interval(), self._view_pace.wait())
        return self._poll_interval()

    def _poll_interval(self) -> float:
        if self._starting and time.monotonic() < self._watch_launches_until:
            return self.settings.launch_poll_interval
        return self.settings.poll_interval

    # -- one pass ---------------------------------------------------------------------------------

    def run_once(self, *, check_intents: bool = True) -> None:
        now = self._clock()
        if check_intents or now - self._last_intent_check >= self.settings.intent_check_interval:
            self._last_intent_check = now
            self._take_in_intents(now)
        for key, classification in self._late_exits:
            self._on_exit(key, classification, now)
        self._late_exits.clear()
        self._follow_node_states()
        for event in self.executor.events():
            self._on_executor_event(event, now)
        self._set_timers(self._changed.values())
        for job_id, wakeup in list(self._timers.items()):
            if wakeup <= now:
                job = self._jobs[job_id]
                self._handle(job, fw.on_tick(job.machine, now), now)
        if self._schedule_needed or self._new_demand:
            self._schedule_pass(now)
        changed = self._persist()
        self._run_effects()
        if changed:
            self._publish()
        if self._view_stale and not self._view_pace.wait():
            self._refresh_view()

    # -- nodes ------------------------------------------------------------------------------------

    def _follow_node_states(self) -> None:
        """Nodes the engine lost, that cannot take tasks, or that are cordoned get no new
        placements (their running tasks end through the executor's events, or go on when
        merely cordoned); a node that is usable again takes them at once."""
        states = {**self.executor.node_states(), **self._cordons}
        if states == self._node_states:
            return
        for name in sorted(set(states) | set(self._node_states)):
            usable = name not in states or states[name].usable
            was_usable = name not in self._node_states or self._node_states[name].usable
            if usable == was_usable:
                continue
            self.scheduler.set_node_health(name, usable)
            if usable:
                log.info("node %s can take tasks again", name)
                self._schedule_needed = True
            else:
                log.warning("node %s takes no new tasks: %s", name, states[name].message)
        self._node_states = states
        self._publish()

    def _take_in_intents(self, now: float) -> None:
        """What users asked since the last pass (new jobs, stop requests, cordons), read in one
        transaction."""
        with self.database.reading() as session:
            fresh = session.execute(
                select(JobRow.id, JobRow.username, JobRow.name, JobRow.submitted_at, JobRow.spec)
                .where(JobRow.status.is_(None))
                .order_by(JobRow.id)
            ).all()
            stopping = session.scalars(
                select(JobRow.id).where(
                    JobRow.stop_requested_at.is_not(None),
                    JobRow.execution_type == fw.ExecutionType.START.value,
                    JobRow.status.is_not(None),
                )
            ).all()
            cordons = session.scalars(select(NodeCordon)).all()
            if self._fairness.read_limits(session):
                self._schedule_needed = True  # jobs held back by a limit may fit now
        self._take_in_new_jobs(fresh, now)
        self._apply_stop_requests(stopping, now)
        self._cordons = {
            cordon.node: NodeState(
                cordon.node, NodeCondition.CORDONED, f"cordoned by {cordon.by}: {cordon.reason}"
            )
            for cordon in cordons
            if cordon.node in self._node_names
        }

    def _take_in_new_jobs(
        self, fresh: Sequence[Row[int, str, str, datetime, dict[str, Any]]], now: float
    ) -> None:
        for job_id, username, name, submitted_at, stored_spec in fresh:
            spec = JobSpec.model_validate(stored_spec)
            machine, actions = fw.new_job(job_policy(spec, self.settings.backoff), now)
            job = ActiveJob(job_id, username, name, submitted_at, spec, machine, groups=[])
            self._jobs[job_id] = job  # its "Submitted" event is read from the job itself
            try:
                job.groups = job_requests(spec, self.scheduler.cluster, job.framework_name)
            except RequestRefused as refused:
                self._refuse(job, "; ".join(refused.problems), now)
                continue
            self._handle(job, actions, now)

    def _apply_stop_requests(self, stopping: Sequence[int], now: float) -> None:
        for job_id in stopping:
            job = self._jobs.get(job_id)
            if job is not None and job.machine.execution is fw.ExecutionType.START:
                self._record(job, "Normal", "StopRequested", "stop requested")
                self._handle(job, fw.on_stop_requested(job.machine, now), now)

    def _refuse(self, job: ActiveJob, why: str, now: float) -> None:
        status = fw.CompletionStatus.of(
            self._exit_specs.current().for_code(-200, diagnostics=(why,))
        )
        self._record(job, "Warning", "Refused", why)
        self._handle(job, fw.on_refused(job.machine, status, now), now)

    # -- executor events --------------------------------------------------------------------------

    def _on_executor_event(self, event: TaskEvent, now: float) -> None:
        if event.kind is TaskEventKind.PREPARING:
            self._on_preparing(event)
            return
        self._starting.discard(event.key)
        if event.kind is TaskEventKind.STARTED:
            found = self._task_of(event.key)
            if found is not None:
                job, task = found
                current = job.machine.tasks[task].current
                if current.placement is not None:
                    current.placement.pop("preparing", None)
                if job.wait_reason is not None and job.wait_reason.kind is WaitKind.PREPARING:
                    job.wait_reason = None
                self._handle(
                    job, fw.on_task_running(job.machine, task, current.attempt_id, now), now
                )
        elif event.result is not None:
            self._on_exit(event.key, event.result.classification, now)

    def _on_preparing(self, event: TaskEvent) -> None:
        """A launched task waits for its node (an image being pulled): the task and, while the
        job waits, the job say what for."""
        found = self._task_of(event.key)
        if found is None:
            return
        job, task = found
        current = job.machine.tasks[task].current
        if current.placement is None or current.placement.get("preparing") == event.message:
            return
        current.placement["preparing"] = event.message
        role, index = task
        job.wait_reason = WaitReason(
            WaitKind.PREPARING,
            f"task {role}-{index}: {event.message}",
            {"role": role, "index": index},
        )
        self._changed[job.id] = job

    def _on_exit(self, key: str, classification: Classification, now: float) -> None:
        found = self._task_of(key)
        if found is None:
            return
        job, task = found
        current = job.machine.tasks[task].current
        if current.placement is not None:
            current.placement["originExitCode"] = classification.origin_exit_code
        status = fw.CompletionStatus.of(classification)
        self._handle(
            job, fw.on_task_exited(job.machine, task, current.attempt_id, status, now), now
        )
        level = "Normal" if status.succeeded else "Warning"
        self._record(
            job,
            level,
            "TaskCompleted",
            f"exit code {status.code} ({status.phrase})",
            task,
        )

    def _track(self, job: ActiveJob, task: fw.TaskKey, key: str) -> None:
        self._keys[key] = (job.id, task)
        self._key_of[(job.id, task)] = key

    def _task_of(self, key: str) -> tuple[ActiveJob, fw.TaskKey] | None:
        found = self._keys.get(key)
        if found is None:
            return None
        job = self._jobs.get(found[0])
        return (job, found[1]) if job is not None else None

    # -- actions of the state machine -------------------------------------------------------------

    def _handle(self, job: ActiveJob, actions: Iterable[fw.Action], now: float) -> None:
        self._changed[job.id] = job
        for action in actions:
            if isinstance(action, fw.RequestPlacement):
                self._new_demand.add(job.id)
            elif isinstance(action, fw.CancelPlacement):
                self._cancel_placement(job, action.tasks)
            elif isinstance(action, fw.Launch):
                self._effects.append(_Launch(job, action.task))
            elif isinstance(action, fw.Kill):
                self._effects.append(self._killer(job, action.task, action.status))
            elif isinstance(action, fw.TaskEnded):
                self._task_ended(job, action.task)
            elif isinstance(action, fw.AttemptEnded):
                self._attempt_ended(job, action)

    def _cancel_placement(self, job: ActiveJob, tasks: tuple[fw.TaskKey, ...]) -> None:
        """Waiting tasks gave up: drop any cells a preempting group of theirs reserved."""
        for name in {job.group_of(task).name for task in tasks}:
            if name not in job.allocations:
                self.scheduler.release(name)
                self._owners.pop(name, None)
                self._schedule_needed = True

    def _task_ended(self, job: ActiveJob, task: fw.TaskKey) -> None:
        key = self._key_of.pop((job.id, task), None)
        if key is not None:
            del self._keys[key]
            self._starting.discard(key)
            self._ports.release(key)
        group = job.group_of(task)
        if group.name in job.allocations and job.group_idle(group):
            self.scheduler.release(group.name)
            del job.allocations[group.name]
            self._owners.pop(group.name, None)
            self._schedule_needed = True

    def _attempt_ended(self, job: ActiveJob, ended: fw.AttemptEnded) -> None:
        outcome = f"exit code {ended.completion.code} ({ended.completion.phrase})"
        if ended.retrying:
            self._record(
                job, "Warning", "Retrying", f"attempt {ended.attempt_id} ended with {outcome}"
            )
        else:
            level = "Normal" if ended.completion.succeeded else "Warning"
            self._record(job, level, "Completed", f"job ended with {outcome}")

    # -- scheduling -------------------------------------------------------------------------------

    def _schedule_pass(self, now: float) -> None:
        """Try the waiting jobs in queue order. Placing jobs only takes cells, so a job that
        had to wait can only fit after cells were freed; until then only the jobs that asked
        for cells since the last pass are tried, which keeps a pass cheap behind a long queue."""
        if self._schedule_needed:
            candidates = list(self._jobs.values())
        else:
            candidates = [self._jobs[i] for i in self._new_demand if i in self._jobs]
        self._schedule_needed = False
        self._new_demand.clear()
        self._fairness.sync(self._changed.values(), now)
        waiting = self._fairness.queue((job for job in candidates if job.pending_groups()), now)
        for job in waiting:
            self._schedule_job(job, now)

    def _schedule_job(self, job: ActiveJob, now: float) -> None:
        """Place the job's waiting groups; under gang allocation all of them or none."""
        started = time.perf_counter()
        try:
            self._place_groups(job, now)
        finally:
            if self.observer is not None:
                self.observer.decided(time.perf_counter() - started)

    def _place_groups(self, job: ActiveJob, now: float) -> None:
        gang = job.machine.policy.gang_allocation
        bound: list[tuple[GroupRequest, Placement]] = []
        blocked: WaitReason | None = None
        held_back = self._fairness.held_back(job)
        for group in job.pending_groups():
            decision = self._decide(group, held_back)
            if isinstance(decision, Bind):
                self.scheduler.allocate(group.name, decision.placement)
                self._owners[group.name] = job
                self._downgrade(decision.downgraded, job)
                bound.append((group, decision.placement))
            else:
                if isinstance(decision, Preempt):
                    self._owners[group.name] = job
                    self._preempt(job, decision)
                    blocked = _preempting_reason(decision.victims, self._owners)
                else:
                    blocked = decision.reason
                if gang:
                    break
        if gang and blocked is not None:
            for group, _ in bound:
                self.scheduler.release(group.name)
                self._owners.pop(group.name, None)
            bound = []
        for group, placement in bound:
            self._commit(job, group, placement, now)
        self._fairness.sync((job,), now)
        if blocked is not None and blocked.kind is WaitKind.BAD_NODES:
            blocked = self._with_node_messages(blocked)
        if job.wait_reason != blocked:
            job.wait_reason = blocked
            self._changed[job.id] = job
            if blocked is not None:
                self._record(job, "Normal", "Waiting", blocked.message)

    def _decide(self, group: GroupRequest, held_back: WaitReason | None) -> Decision:
        """The scheduler's decision for a group, unless its user's limit holds it back: then it
        gives up any cells or reservation kept for it in its VC, and may only overflow onto
        idle cells as an opportunistic group (where the policy overflows)."""
        if held_back is None:
            return self.scheduler.schedule(group)
        self.scheduler.release(group.name)
        self._owners.pop(group.name, None)
        if self.scheduler.overflow:
            overflow = self.scheduler.schedule(replace(group, priority=OPPORTUNISTIC_PRIORITY))
            if isinstance(overflow, Bind):
                return overflow
        return Wait(held_back)

    def _with_node_messages(self, reason: WaitReason) -> WaitReason:
        """A wait for unhealthy nodes says what each of them lacks ("node out of disk space",
        "gone from the Ray cluster", ...)."""
        listed = reason.details.get("nodes")
        nodes = [str(node) for node in listed] if isinstance(listed, list) else []
        why = [
            f"{node}: {state.message}"
            for node in nodes
            if (state := self._node_states.get(node)) is not None and state.message
        ]
        if not why:
            return reason
        return WaitReason(reason.kind, f"{reason.message} {'; '.join(why)}", reason.details)

    def _commit(
        self, job: ActiveJob, group: GroupRequest, placement: Placement, now: float
    ) -> None:
        try:
            placed = assign_ports(
                job,
                placement.pods,
                self._ports,
                self.executor.isolation_on,
                self.scheduler.cluster.chain_sku(placement.chain).device,
                self.scheduler.cluster.rdma_nodes,
            )
        except PortsExhaustedError as exhausted:
            self.scheduler.release(group.name)
            self._owners.pop(group.name, None)
            job.wait_reason = WaitReason(WaitKind.TOPOLOGY, str(exhausted))
            return
        job.allocations[group.name] = Allocation(group, placement)
        for task, where in placed.items():
            job.machine.tasks[task].current.placement = where
            self._track(job, task, where["key"])
        nodes = ", ".join(placement.nodes)
        self._record(job, "Normal", "Scheduled", f"{group.name} placed on {nodes}")
        if self.observer is not None:
            self.observer.placed(job.spec.virtual_cluster, now - job.submitted_at.timestamp())
        self._handle(job, fw.on_placed(job.machine, placed, now), now)

    def _preempt(self, preemptor: ActiveJob, decision: Preempt) -> None:
        for victim_group in decision.victims:
            victim = self._owners.get(victim_group)
            if victim is None:
                continue
            group = victim.group_named(victim_group)
            tasks = [(pod.role, pod.index) for pod in group.pods]
            actions = fw.on_preempted(
                victim.machine, tasks, preemptor.framework_name, self._clock()
            )
            if actions:
                self._record(
                    victim,
                    "Warning",
                    "Preempted",
                    f"preempted by {preemptor.framework_name} (higher priority)",
                )
            self._handle(victim, actions, self._clock())

    def _downgrade(self, groups: tuple[str, ...], preemptor: ActiveJob) -> None:
        """Lazy preemption: these groups keep running, now as opportunistic ones."""
        for name in groups:
            victim = self._owners.get(name)
            if victim is None or name not in victim.allocations:
                continue
            victim.allocations[name] = replace(victim.allocations[name], opportunistic=True)
            self._changed[victim.id] = victim
            self._record(
                victim,
                "Warning",
                "Downgraded",
                f"now runs as opportunistic: {preemptor.framework_name} needs its VC cells",
            )

    # -- side effects (after the store has the new state) -----------------------------------------

    def _launch(self, launches: list[_Launch]) -> None:
        """Start the tasks concurrently (a gang's tasks together, not one after another),
        reading each job's secrets and storages once for all of its tasks."""
        if not launches:
            return
        if self._launch_pool is None:
            self._launch_pool = ThreadPoolExecutor(LAUNCH_THREADS, "pai-launch")
        of_job: dict[int, tuple[dict[str, Any], TaskStorages, TaskAccess | None]] = {}
        started = []
        for launch in launches:
            try:
                prepared = self._prepare(launch, of_job)
            except Exception as error:
                self._launch_failed(launch, error)
                continue
            started.append((launch, self._launch_pool.submit(self.executor.launch, prepared)))
        for launch, future in started:
            failure = future.exception()
            if failure is None:
                self._starting.add(task_key(launch.job, launch.task))
            else:
                self._launch_failed(launch, failure)
        if started:
            self._watch_launches_until = time.monotonic() + self.settings.launch_watch

    def _prepare(
        self,
        launch: _Launch,
        of_job: dict[int, tuple[dict[str, Any], TaskStorages, TaskAccess | None]],
    ) -> TaskLaunch:
        job = launch.job
        if job.id not in of_job:
            of_job[job.id] = (
                self._secrets_of(job),
                self._storages.of_job(job.id),
                task_access(self.database, self._box, job),
            )
        secrets, storages, access = of_job[job.id]
        return storages.attach(
            build_launch(job, launch.task, secrets, self.executor.attempt_dir, access)
        )

    def _launch_failed(self, launch: _Launch, error: BaseException) -> None:
        job, task = launch.job, launch.task
        log.warning("%s: launching %s failed: %s", job.framework_name, task, error)
        code = ExitCode.POD_CREATION_TRANSIENT_ERROR
        if isinstance(error, ValueError):  # the job itself is wrong (e.g. a plugin)
            code = ExitCode.POD_CREATION_PERMANENT_ERROR
        verdict = self._exit_specs.current().for_code(int(code), diagnostics=(str(error),))
        self._late_exits.append((task_key(job, task), verdict))
        self._wake.set()

    def _killer(
        self, job: ActiveJob, task: fw.TaskKey, status: fw.CompletionStatus
    ) -> Callable[[], None]:
        key = task_key(job, task)
        reason = _KILL_REASONS.get(status.code, KillReason.ATTEMPT_COMPLETED)

        def kill() -> None:
            try:
                self.executor.kill(key, reason)
            except Exception as error:
                log.warning("%s: killing %s failed: %s", job.framework_name, key, error)
                verdict = self._exit_specs.current().for_code(status.code, diagnostics=())
                self._late_exits.append((key, verdict))
                self._wake.set()

        return kill

    def _run_effects(self) -> None:
        """In the order decided; consecutive launches together."""
        effects, self._effects = self._effects, []
        launches: list[_Launch] = []
        for effect in effects:
            if isinstance(effect, _Launch):
                launches.append(effect)
                continue
            self._launch(launches)
            launches = []
            effect()
        self._launch(launches)

    def _secrets_of(self, job: ActiveJob) -> dict[str, Any]:
        with self.database.session() as session:
            sealed = session.scalar(select(JobRow.sealed_secrets).where(JobRow.id == job.id))
        return self._box.open(sealed) if sealed else {}

    # -- persistence ------------------------------------------------------------------------------

    def _record(
        self,
        job: ActiveJob,
        level: str,
        reason: str,
        message: str,
        task: fw.TaskKey | None = None,
    ) -> None:
        self._events.append(
            {
                "job_id": job.id,
                "at": datetime.now(UTC),
                "type": level,
                "reason": reason,
                "message": message,
                "role": task[0] if task else None,
                "task_index": task[1] if task else None,
            }
        )

    def _persist(self) -> bool:
        """Write every changed job (and new events) in one transaction; say if anything was.
        If the write fails, the jobs stay marked as changed for the next pass."""
        changed = list(self._changed.values())
        if not changed and not self._events:
            return False
        # Rows are built before the transaction so that it holds the write lock only to write.
        rows = [{"job_id": job.id, **_row_values(job)} for job in changed]
        with self.database.session() as session:
            if rows:
                _update_jobs(session, rows)
            if self._events:
                session.execute(insert(_JOB_EVENTS), self._events)
        self._changed.clear()
        self._events = []
        self._set_timers(changed)
        for job in changed:
            self._tally.update(job)
            if job.machine.finished:
                del self._jobs[job.id]
        return True

    def _set_timers(self, jobs: Iterable[ActiveJob]) -> None:
        for job in jobs:
            wakeup = None if job.machine.finished else fw.next_wakeup(job.machine)
            if wakeup is None:
                self._timers.pop(job.id, None)
            else:
                self._timers[job.id] = wakeup

    def _publish(self) -> None:
        """The view changed: it is refreshed at the end of this pass, or of a later one when
        refreshing it costs more than `VIEW_SHARE` of the controller's time would allow."""
        self._view_stale = True

    def _refresh_view(self) -> None:
        with self._view_pace.run():
            self._snapshot = self.scheduler.snapshot()
            self._vc_jobs = self._tally.per_vc()
            self._fairness_state = self._fairness.state(self._clock())
        self._view_stale = False

    # -- recovery ---------------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the in-memory state from the store and re-attach to running tasks."""
        now = self._clock()
        with self.database.session() as session:
            rows = session.scalars(
                select(JobRow).where(JobRow.status.is_not(None), JobRow.state.not_in(FINAL_STATES))
            ).all()
            stored = [
                (r.id, r.username, r.name, r.submitted_at, r.spec, r.status, r.allocations)
                for r in rows
            ]
            self._fairness.restore(session, now)
        allocations: list[Allocation] = []
        for job_id, username, name, submitted_at, spec_data, status, allocated in stored:
            spec = JobSpec.model_validate(spec_data)
            machine = fw.Job.from_dict(job_policy(spec, self.settings.backoff), status or {})
            job = ActiveJob(job_id, username, name, submitted_at, spec, machine, groups=[])
            self._jobs[job_id] = job
            self._changed[job_id] = job
            try:
                job.groups = job_requests(spec, self.scheduler.cluster, job.framework_name)
            except RequestRefused as refused:
                self._refuse(job, "; ".join(refused.problems), now)
            for data in allocated:
                allocation = allocation_from_dict(data)
                job.allocations[allocation.request.name] = allocation
                self._owners[allocation.request.name] = job
                allocations.append(allocation)
        result = self.scheduler.rebuild(allocations)
        for name, why in result.rejected.items():
            owner = self._owners.pop(name)
            owner.allocations.pop(name, None)
            log.warning("%s: its placement could not be restored: %s", owner.framework_name, why)
            tasks = [(pod.role, pod.index) for pod in owner.group_named(name).pods]
            self._handle(owner, fw.on_preempted(owner.machine, tasks, "a restart", now), now)
        self._restore_tasks(now)
        self._schedule_needed = True
        self._refresh_view()  # what was rebuilt shows before the first pass changes anything

    def _restore_tasks(self, now: float) -> None:
        known = {status.key: status for status in self.executor.recover()}
        assignments: list[PortAssignment] = []
        for job in list(self._jobs.values()):
            for task_name, task in job.machine.tasks.items():
                where = task.current.placement
                if not task.alive or where is None:
                    continue
                key = where["key"]
                self._track(job, task_name, key)
                assignments.append(
                    PortAssignment(
                        key,
                        where["node"],
                        {label: tuple(p) for label, p in where["ports"].items()},
                    )
                )
                status = known.pop(key, None)
                if status is None:
                    self._restore_unknown(job, task_name, task, now)
                elif status.phase is TaskPhase.FINISHED and status.result is not None:
                    self._late_exits.append((key, status.result.classification))
                else:
                    if status.phase is TaskPhase.RUNNING:
                        attempt = task.current.attempt_id
                        self._handle(
                            job, fw.on_task_running(job.machine, task_name, attempt, now), now
                        )
                    if task.kill_status is not None:
                        self._effects.append(self._killer(job, task_name, task.kill_status))
        self._ports.restore(assignments)
        for key, status in known.items():
            if status.phase is not TaskPhase.FINISHED:
                log.warning("task %s belongs to no running job; stopping it", key)
                self.executor.kill(key, KillReason.ATTEMPT_COMPLETED)

    def _restore_unknown(
        self, job: ActiveJob, task_name: fw.TaskKey, task: fw.Task, now: float
    ) -> None:
        """A task the store says was launched, but the executor has no trace of."""
        if task.state is fw.AttemptState.CREATION_REQUESTED:
            self._effects.append(_Launch(job, task_name))  # recorded, never started
            return
        code = task.kill_status.code if task.kill_status else int(ExitCode.POD_EXTERNAL_DELETED)
        verdict = self._exit_specs.current().for_code(
            code, diagnostics=("the task's process was lost while the control plane was down",)
        )
        self._late_exits.append((task.current.placement["key"], verdict))  # type: ignore[index]


# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Launch:
    """An effect: start the current attempt of `task` (see `Controller._launch`)."""

    job: ActiveJob
    task: fw.TaskKey


def _preempting_reason(victims: tuple[str, ...], owners: dict[str, ActiveJob]) -> WaitReason:
    names = sorted({owners[v].framework_name if v in owners else v for v in victims})
    return WaitReason(
        WaitKind.VC_QUOTA,
        f"preempting lower-priority jobs to free its cells: {', '.join(names)}",
        {"victims": names},
    )


def _time(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None


ROW_COLUMNS = (
    "status",
    "state",
    "sub_state",
    "execution_type",
    "launched_at",
    "completed_at",
    "retries",
    "exit_code",
    "allocations",
    "wait_reason",
)
"""The columns of `jobs` that the controller writes (`_row_values`)."""
_JOBS = JobRow.metadata.tables[JobRow.__tablename__]
_JOB_EVENTS = JobEvent.metadata.tables[JobEvent.__tablename__]
_UPDATE_JOB = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job_id"))
    .values({name: bindparam(name, type_=_JOBS.c[name].type) for name in ROW_COLUMNS})
)
"""Writes `ROW_COLUMNS` of the job whose id is the parameter `job_id`."""
_CHANGED_JOBS = json_rows(
    [column("job_id", Integer), *(_JOBS.c[name] for name in ROW_COLUMNS)], name="changed"
)
_UPDATE_JOBS_FROM_DOCUMENT = (
    update(_JOBS)
    .where(_JOBS.c.id == _CHANGED_JOBS.c.job_id)
    .values({name: _CHANGED_JOBS.c[name] for name in ROW_COLUMNS})
)
"""Writes `ROW_COLUMNS` of every job of a `rows_documents` document (rows as `_row_values`)."""


def _update_jobs(session: Session, rows: list[dict[str, Any]]) -> None:
    """Write each row's `ROW_COLUMNS` to the job whose id is its `job_id`: on PostgreSQL in one
    statement of one parameter, on SQLite as one statement with many parameter sets (a Core
    statement: the ORM's bulk forms check every row's keys against the mapping first)."""
    if session.get_bind().dialect.name == "postgresql":
        for parameters in rows_documents(rows):
            session.execute(_UPDATE_JOBS_FROM_DOCUMENT, parameters)
    else:
        session.execute(_UPDATE_JOB, rows)


def _row_values(job: ActiveJob) -> dict[str, Any]:
    machine = job.machine
    attempts = list(fw.all_attempts(machine))
    running = [a.running_at for a in attempts if a.running_at is not None]
    completions = [a.completion for a in attempts if a.completion is not None]
    reason = job.wait_reason
    return {
        "status": machine.to_dict(),
        "state": fw.job_shown_state(machine),
        "sub_state": machine.state.value,
        "execution_type": machine.execution.value,
        "launched_at": _time(min(running, default=None)),
        "completed_at": _time(machine.attempt.completed_at) if machine.finished else None,
        "retries": machine.retry.total,
        "exit_code": completions[-1].code if completions else None,
        "allocations": [allocation_to_dict(a) for a in job.allocations.values()],
        "wait_reason": (
            {"kind": reason.kind.value, "message": reason.message, "details": dict(reason.details)}
            if reason is not None
            else None
        ),
    }
