"""Replaying a trace in virtual time through a policy, PAI's job state machine and the simulated
executor: the controller's loop, without a store, a clock or processes.

Each trace job becomes one gang (`pai.sim.workload`) and one `pai.orchestrator.framework` job.
Events are handled in time order, all events of one instant together: arrivals, then what the
executor reports (task starts, ends, kills), then a scheduling pass over the waiting groups in
(priority desc, submission asc) order without head-of-line blocking (`pai.sim.queue`). A Bind is
allocated at once and the job's tasks launched; a Preempt has the victims' tasks killed, which
ends their attempt with a transient code so the state machine retries them for free (keeping
their place in the queue), and the preemptor binds once the victims' cells are released.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path

from pai.executors.base import KillReason, TaskEvent, TaskEventKind, TaskLaunch
from pai.executors.simulated import SimulatedExecutor, VirtualClock
from pai.orchestrator import framework as fw
from pai.scheduler.admission import CapacityIndex
from pai.scheduler.pai import RESERVED_FOR, PaiScheduler
from pai.scheduler.types import Bind, GroupRequest, Placement, Preempt
from pai.sim.policies import Policy
from pai.sim.queue import CLUSTER, Order, Scope, Shape, WaitingQueue, user_scope, vc_scope
from pai.sim.results import JobRecord, ReplayResult
from pai.sim.traces import Trace, TraceJob
from pai.sim.usersharing import Rank, UserSharing
from pai.sim.workload import ROLE, group_request, largest_pods, pod_sizes

Progress = Callable[[int, int], None]
"""Called with (jobs done, jobs in the trace) now and then during a replay."""

PROGRESS_EVERY = 1000
_KILL_REASONS = {reason.exit_code: reason for reason in KillReason}
_NOWHERE = Path()


class _Job:
    """A trace job while it is in the replay."""

    __slots__ = (
        "charged_attempt",
        "index",
        "keys",
        "machine",
        "opportunistic",
        "order",
        "placement",
        "progress_s",
        "requests",
        "shape",
        "trace",
        "user",
    )

    def __init__(
        self, index: int, trace: TraceJob, requests: tuple[GroupRequest, ...], machine: fw.Job
    ) -> None:
        self.index = index
        self.trace = trace
        self.requests = requests  # tried in turn: guaranteed, then opportunistic on overflow
        self.machine = machine
        self.shape: Shape = tuple(pod.leaf_cells for pod in requests[0].pods)
        self.order: Order = (-requests[0].priority, trace.submit_time_s, index)
        self.placement: Placement | None = None
        self.opportunistic = False  # ever ran as an opportunistic job
        self.keys: dict[fw.TaskKey, str] = {}  # executor key of each live task attempt
        self.progress_s = 0.0  # work saved by checkpoints, resumed by the next attempt
        self.charged_attempt = -1  # the last attempt whose preemption was accounted for
        self.user = trace.user or ""

    @property
    def remaining_s(self) -> float:
        return self.trace.duration_s - self.progress_s

    @property
    def name(self) -> str:
        return self.requests[0].name

    @property
    def vc(self) -> str:
        return self.requests[0].vc


class _Usage:
    """GPUs held, per node and per VC, integrated over time (policy-independent bookkeeping)."""

    def __init__(self, policy: Policy) -> None:
        cluster = policy.cluster
        self.node_total: dict[str, int] = {}
        for node in cluster.nodes:
            if cluster.sku_types[node.sku_type].gpu > 0:
                self.node_total[node.name] = len(node.leaf_indices)
        self.node_used = dict.fromkeys(self.node_total, 0)
        self.gpus = sum(self.node_total.values())
        self.nodes_by_free: Counter[int] = Counter(self.node_total.values())
        self.allocated = 0
        self.vc_allocated: Counter[str] = Counter()
        self.vc_since: dict[str, float] = {}
        self.vc_gpu_seconds: dict[str, float] = {}

    def change(self, vc: str, placement: Placement, sign: int, now: float) -> None:
        for pod in placement.pods:
            used = self.node_used[pod.node]
            free = self.node_total[pod.node] - used
            delta = sign * len(pod.leaf_indices)
            self.nodes_by_free[free] -= 1
            self.nodes_by_free[free - delta] += 1
            self.node_used[pod.node] = used + delta
            self.allocated += delta
            held = self.vc_allocated[vc] * (now - self.vc_since.get(vc, now))
            self.vc_gpu_seconds[vc] = self.vc_gpu_seconds.get(vc, 0.0) + held
            self.vc_since[vc] = now
            self.vc_allocated[vc] += delta

    def unusable(self, smallest_pod: int) -> int:
        """Free GPUs on nodes that cannot hold a pod of `smallest_pod` GPUs."""
        return sum(free * self.nodes_by_free[free] for free in range(1, smallest_pod))

    def close(self, now: float) -> dict[str, float]:
        for vc, since in self.vc_since.items():
            held = self.vc_allocated[vc] * (now - since)
            self.vc_gpu_seconds[vc] = self.vc_gpu_seconds.get(vc, 0.0) + held
            self.vc_since[vc] = now
        return dict(self.vc_gpu_seconds)


class Replay:
    """One replay of `trace` through `policy`; `run()` returns the `ReplayResult`."""

    def __init__(
        self,
        trace: Trace,
        policy: Policy,
        *,
        cluster_label: str = "",
        progress: Progress | None = None,
    ) -> None:
        self.trace = trace
        self.policy = policy
        self.cluster_label = cluster_label
        self._progress = progress
        self._largest_pod = largest_pods(policy.cluster, trace.vcs)
        self._capacity = CapacityIndex(policy.cluster)
        self._clock = VirtualClock(trace.jobs[0].submit_time_s if trace.jobs else 0.0)
        self._executor = SimulatedExecutor(self._clock, self._run_time)
        self._queue: WaitingQueue[_Job] = WaitingQueue()
        self._usage = _Usage(policy)
        self._active: dict[str, _Job] = {}  # group name -> job, from arrival to completion
        self._tasks: dict[str, tuple[_Job, fw.TaskKey, int]] = {}  # executor key -> task
        self._preempting: dict[str, tuple[_Job, GroupRequest]] = {}
        self._wakeups: list[tuple[float, int, str]] = []  # framework retry back-offs
        self._job_policies: dict[int, fw.JobPolicy] = {}
        self._records: list[JobRecord] = []
        self._refused: Counter[str] = Counter()
        self._decisions = 0
        self._events = 0
        self._idle_waiting = 0  # free GPUs while jobs wait, as of the last instant
        self._waiting: Counter[str] = Counter()  # waiting jobs per VC
        self._waiting_vcs: list[str] = []  # VCs with waiting jobs, as of the last instant
        self._vc_idle_waiting: dict[str, float] = {}  # GPU-seconds idle while the VC waits
        self._vc_lost: dict[str, float] = {}  # GPU-seconds lost to preemption, per VC
        self._unusable = 0  # free GPUs no waiting pod fits on, as of the last instant
        self._integrals = [0.0, 0.0, 0.0]  # allocated, idle while waiting, unusable
        self._lost_gpu_seconds = 0.0  # run by attempts that were preempted
        self._series: tuple[list[float], list[int]] = ([], [])
        self._sharing = (
            UserSharing(
                policy.cluster,
                half_life_s=policy.fair_share_half_life_s,
                limits=policy.user_limits,
                starving_after_s=getattr(policy.scheduler, "reserves_after_s", math.inf),
            )
            if policy.shares_vcs_between_users
            else None
        )
        if isinstance(policy.scheduler, PaiScheduler):
            policy.scheduler.clock = self._now
            policy.scheduler.run_time = self._declared_run_time
            policy.scheduler.work_at_risk = self._work_at_risk

    def _now(self) -> float:
        return self._clock.now

    def _declared_run_time(self, request: GroupRequest) -> float | None:
        """What a trace job "declares": its remaining trace duration (an exact estimate)."""
        job = self._active.get(request.name)
        return None if job is None else job.remaining_s

    def _work_at_risk(self, group_name: str) -> float:
        """GPU-seconds a running job would lose if preempted now (nothing if already charged)."""
        job = self._active[group_name]
        if job.charged_attempt == job.machine.attempt.attempt_id:
            return 0.0
        ran, saved = self._run_and_saved(job)
        return job.trace.gpus * (ran - saved)

    def _run_and_saved(self, job: _Job) -> tuple[float, float]:
        """How long the job's current attempt has run, and how much of it checkpoints saved."""
        running_since = job.machine.attempt.running_at
        if running_since is None:
            return 0.0, 0.0
        ran = min(self._clock.now - running_since, job.remaining_s)
        return ran, self.policy.checkpointed(ran)

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> ReplayResult:
        started = time.perf_counter()
        jobs = self.trace.jobs
        arrived = 0
        while True:
            upcoming = [
                moment
                for moment in (
                    jobs[arrived].submit_time_s if arrived < len(jobs) else None,
                    self._executor.next_event_time(),
                    self._wakeups[0][0] if self._wakeups else None,
                )
                if moment is not None
            ]
            if not upcoming:
                break
            now = min(upcoming)
            self._advance(now)
            while arrived < len(jobs) and jobs[arrived].submit_time_s <= now:
                self._arrive(arrived, jobs[arrived])
                arrived += 1
            while self._wakeups and self._wakeups[0][0] <= now:
                _, _, name = heapq.heappop(self._wakeups)
                job = self._active.get(name)
                if job is not None:
                    self._carry_out(job, fw.on_tick(job.machine, now))
            self._settle(now)
            self._observe(now)
        return self._result(time.perf_counter() - started)

    def _settle(self, now: float) -> None:
        """Handle everything that happens at this instant, kills and their retries included."""
        while True:
            for event in self._executor.events():
                self._on_event(event, now)
            self._retry_preemptors()
            self._queue.run_pass(self._attempt, self._fair_rank())
            upcoming = self._executor.next_event_time()
            if upcoming is None or upcoming > now:
                return

    def _advance(self, now: float) -> None:
        elapsed = now - self._clock.now
        if elapsed > 0:
            self._integrals[0] += self._usage.allocated * elapsed
            self._integrals[1] += self._idle_waiting * elapsed
            self._integrals[2] += self._unusable * elapsed
            for vc in self._waiting_vcs:
                self._vc_idle_waiting[vc] = (
                    self._vc_idle_waiting.get(vc, 0.0) + self._idle_waiting * elapsed
                )
        self._clock.advance_to(now)

    def _observe(self, now: float) -> None:
        usage = self._usage
        smallest = self._queue.smallest_waiting_pod()
        if smallest is None:
            self._idle_waiting = self._unusable = 0
            self._waiting_vcs = []
        else:
            self._idle_waiting = usage.gpus - usage.allocated
            self._unusable = usage.unusable(smallest)
            self._waiting_vcs = [vc for vc, count in self._waiting.items() if count]
        times, values = self._series
        if not values or values[-1] != usage.allocated:
            times.append(now)
            values.append(usage.allocated)

    # -- jobs ------------------------------------------------------------------------------------

    def _arrive(self, index: int, trace_job: TraceJob) -> None:
        self._events += 1
        if trace_job.gpus < 1:
            self._refused[trace_job.vc] += 1
            return
        sizes = pod_sizes(trace_job.gpus, self._largest_pod[trace_job.vc])
        request = group_request(f"j{index}", trace_job.vc, sizes)
        if self._capacity.refusal(request) is not None:
            self._refused[trace_job.vc] += 1
            return
        requests: tuple[GroupRequest, ...] = (request,)
        if self.policy.overflow:
            requests += (group_request(request.name, request.vc, sizes, priority=-1),)
        machine, actions = fw.new_job(self._job_policy(len(sizes)), self._clock.now)
        job = _Job(index, trace_job, requests, machine)
        self._active[job.name] = job
        self._carry_out(job, actions)

    def _job_policy(self, pods: int) -> fw.JobPolicy:
        policy = self._job_policies.get(pods)
        if policy is None:
            policy = self._job_policies[pods] = fw.JobPolicy({ROLE: fw.RolePolicy(pods)})
        return policy

    def _run_time(self, task: TaskLaunch) -> float:
        return self._active[task.job].remaining_s

    def _wait(self, job: _Job) -> None:
        self._waiting[job.vc] += 1
        lane: Hashable = (job.vc, job.order[0], job.shape)
        if self._sharing is not None:  # a user's jobs are ordered and limited as the user's
            lane = (job.vc, job.user, job.order[0], job.shape)
        self._queue.push(job, job.order, lane, job.shape)

    def _fair_rank(self) -> Callable[[Order, _Job], Rank] | None:
        """How a pass orders lane heads under fair share (None: by queue order)."""
        sharing, now = self._sharing, self._clock.now
        if sharing is None or not sharing.fair:
            return None
        first = sharing.first_starving(((order, job.vc) for order, job in self._queue.heads()), now)
        return lambda order, job: sharing.rank(order, job.vc, job.user, first, now)

    def _carry_out(self, job: _Job, actions: Iterable[fw.Action]) -> None:
        for action in actions:
            if isinstance(action, fw.RequestPlacement):
                self._wait(job)
            elif isinstance(action, fw.Launch):
                self._launch(job, action.task)
            elif isinstance(action, fw.Kill):
                self._executor.kill(job.keys[action.task], _KILL_REASONS[action.status.code])
            elif isinstance(action, fw.TaskEnded):
                del self._tasks[job.keys.pop(action.task)]
                if not job.keys and job.placement is not None:
                    self._release(job)
            elif isinstance(action, fw.AttemptEnded):
                if not action.retrying:
                    self._finish(job)
                elif job.machine.retry_at is not None:
                    heapq.heappush(self._wakeups, (job.machine.retry_at, job.index, job.name))
            else:
                raise RuntimeError(f"{job.name}: a replay cannot carry out {action}")

    def _launch(self, job: _Job, task: fw.TaskKey) -> None:
        assert job.placement is not None
        pod = job.placement.pods[task[1]]
        state = job.machine.tasks[task]
        attempt = state.current.attempt_id
        key = f"{job.name}-a{job.machine.attempt.attempt_id}-{task[1]}-t{attempt}"
        job.keys[task] = key
        self._tasks[key] = (job, task, attempt)
        self._executor.launch(
            TaskLaunch(
                key=key,
                job=job.name,
                role=task[0],
                index=task[1],
                job_attempt=job.machine.attempt.attempt_id,
                task_attempt=attempt,
                node=pod.node,
                address=pod.address,
                script="",
                env={},
                working_dir=_NOWHERE,
                log_dir=_NOWHERE,
                gpus=pod.leaf_indices,
            )
        )

    def _on_event(self, event: TaskEvent, now: float) -> None:
        self._events += 1
        job, task, attempt = self._tasks[event.key]
        if event.kind is TaskEventKind.STARTED:
            self._carry_out(job, fw.on_task_running(job.machine, task, attempt, now))
        elif event.result is not None:
            status = fw.CompletionStatus.of(event.result.classification)
            self._carry_out(job, fw.on_task_exited(job.machine, task, attempt, status, now))

    def _finish(self, job: _Job) -> None:
        machine = job.machine
        started = [a.running_at for a in fw.all_attempts(machine) if a.running_at is not None]
        trace_job = job.trace
        self._records.append(
            JobRecord(
                trace_job.job_id,
                trace_job.vc,
                trace_job.gpus,
                trace_job.submit_time_s,
                min(started, default=self._clock.now),
                self._clock.now,
                machine.retry.total,
                job.opportunistic,
                trace_job.user,
                trace_job.duration_s,
            )
        )
        del self._active[job.name]
        if self._progress is not None and len(self._records) % PROGRESS_EVERY == 0:
            self._progress(len(self._records), len(self.trace))

    # -- scheduling ------------------------------------------------------------------------------

    def _attempt(self, job: _Job) -> list[Scope] | None:
        """Try to place a waiting job: None if it left the queue, else the scopes it waits on."""
        failures = self._queue.failures
        scopes: list[Scope] = []
        held_back = self._sharing is not None and self._sharing.held_back(
            job.vc, job.user, job.trace.gpus
        )
        for request in job.requests:
            if held_back and not request.opportunistic:
                self.policy.scheduler.release(request.name)  # no reservation while held back
                scopes.append(user_scope(job.vc, job.user))
                continue
            known = failures.known_to_fail(
                request.vc, job.shape, request.priority, request.opportunistic
            )
            if known is not None:
                scopes.append(known)
                continue
            self._decisions += 1
            decision = self.policy.scheduler.schedule(request)
            if isinstance(decision, Bind):
                self._waiting[job.vc] -= 1
                self.policy.scheduler.allocate(request.name, decision.placement)
                self._place(job, request, decision.placement)
                return None
            if isinstance(decision, Preempt):
                self._waiting[job.vc] -= 1
                self._preempt(job, request, decision)
                return None
            scope = self.policy.wait_scope(request, decision.reason)
            if RESERVED_FOR in decision.reason.details:
                scopes.append(scope)  # a shorter job of the same shape may still backfill
                continue
            failures.record(scope, job.shape, request.priority, request.opportunistic)
            scopes.append(scope)
        return scopes

    def _place(self, job: _Job, request: GroupRequest, placement: Placement) -> None:
        job.placement = placement
        job.opportunistic = job.opportunistic or request.opportunistic
        self._usage.change(job.vc, placement, 1, self._clock.now)
        if self._sharing is not None:
            self._sharing.started(
                job.name,
                job.vc,
                job.user,
                job.trace.gpus,
                guaranteed=not request.opportunistic,
                now=self._clock.now,
            )
        tasks = fw.tasks_awaiting_placement(job.machine)
        self._carry_out(job, fw.on_placed(job.machine, tasks, self._clock.now))

    def _preempt(self, job: _Job, request: GroupRequest, decision: Preempt) -> None:
        self._preempting[request.name] = (job, request)
        for name in decision.victims:
            victim = self._active[name]
            attempt = victim.machine.attempt
            if attempt.running_at is not None and victim.charged_attempt != attempt.attempt_id:
                # (a victim still being stopped may be named again by another preemptor)
                victim.charged_attempt = attempt.attempt_id
                ran, saved = self._run_and_saved(victim)
                victim.progress_s += saved
                lost = victim.trace.gpus * (ran - saved)
                self._lost_gpu_seconds += lost
                self._vc_lost[victim.vc] = self._vc_lost.get(victim.vc, 0.0) + lost
            tasks = list(victim.machine.tasks)
            self._carry_out(
                victim, fw.on_preempted(victim.machine, tasks, request.name, self._clock.now)
            )

    def _retry_preemptors(self) -> None:
        for name, (job, request) in list(self._preempting.items()):
            self._decisions += 1
            decision = self.policy.scheduler.schedule(request)
            if isinstance(decision, Preempt):
                continue
            del self._preempting[name]
            if isinstance(decision, Bind):
                self.policy.scheduler.allocate(name, decision.placement)
                self._place(job, request, decision.placement)
            else:
                self._wait(job)

    def _release(self, job: _Job) -> None:
        assert job.placement is not None
        self.policy.scheduler.release(job.name)
        self._usage.change(job.vc, job.placement, -1, self._clock.now)
        job.placement = None
        self._queue.released(vc_scope(job.vc))
        self._queue.released(CLUSTER)
        if self._sharing is not None and self._sharing.ended(job.name, self._clock.now):
            self._queue.released(user_scope(job.vc, job.user))

    # -- result ----------------------------------------------------------------------------------

    def _result(self, wall_seconds: float) -> ReplayResult:
        usage = self._usage
        now = self._clock.now
        unfinished = Counter(job.vc for job in self._active.values())
        quota = {
            vc: sum(capacity.leaves for capacity in chains.values())
            for vc, chains in self._capacity.vcs.items()
        }
        jobs = self.trace.jobs
        return ReplayResult(
            policy=self.policy.name,
            cluster=self.cluster_label,
            gpus=usage.gpus,
            quota_gpus=quota,
            jobs=self._records,
            refused=dict(sorted(self._refused.items())),
            unfinished=dict(sorted(unfinished.items())),
            start_s=jobs[0].submit_time_s if jobs else 0.0,
            end_s=max((record.end_s for record in self._records), default=now),
            allocated_gpu_seconds=self._integrals[0],
            vc_allocated_gpu_seconds=usage.close(now),
            idle_while_waiting_gpu_seconds=self._integrals[1],
            vc_idle_while_waiting_gpu_seconds=dict(self._vc_idle_waiting),
            vc_preempted_gpu_seconds=dict(self._vc_lost),
            fragmented_gpu_seconds=self._integrals[2],
            preempted_gpu_seconds=self._lost_gpu_seconds,
            allocation_series=self._series,
            decisions=self._decisions,
            events=self._events,
            wall_seconds=wall_seconds,
        )


def replay(
    trace: Trace, policy: Policy, *, cluster_label: str = "", progress: Progress | None = None
) -> ReplayResult:
    """Replay `trace` through `policy` (see the module docstring)."""
    return Replay(trace, policy, cluster_label=cluster_label, progress=progress).run()
