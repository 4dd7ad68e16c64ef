"""The inflation replay of GPU-sharing traces, as the ATC'23 paper's simulator runs it.

Pods are drawn at random (with replacement, from a seeded generator) from a pod list and arrive
one after another; none ever leaves. Arrivals stop once the GPUs they asked for (a share counted
as its fraction) reach `target` percent of the cluster's. After each arrival the GPU allocation
rate is recorded: GPUs the placed pods hold, fractions as fractions, over the cluster's GPUs. A
pod that fits nowhere is not placed (it does not wait).

Placement is PAI's: every pod goes through `PaiScheduler.schedule` and `allocate`, the calls
the controller makes; the policies compared differ only in the `SharePolicy` placing tasks on
GPUs (`pai.sim.sharepolicies`). A pod that is preempted (possible with several VCs, where pods
overflow onto other VCs' idle GPUs) is gone: it counts as arrived and no longer as allocated.

With several VCs (`openb_cluster(vcs="models")`), each pod is given a VC at random, in
proportion to the VCs' GPUs, and `vc_guarantees` replays every VC's pods alone on a private
cluster of its cells: a VC got its guarantee if, after every one of its arrivals, its pods hold
at least as many GPUs as they do alone.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pai.cluster import load_cluster
from pai.cluster.model import ClusterConfig
from pai.scheduler.gpushare import SharePolicy
from pai.scheduler.pai import PaiScheduler
from pai.scheduler.requests import DEFAULT_PRIORITY_CLASS, PRIORITY_OF_CLASS
from pai.scheduler.types import Bind, Preempt
from pai.sim.openb import DEFAULT_VC, OpenbPod
from pai.sim.private import private_cluster

DEFAULT_TARGET = 130.0
"""Percent of the cluster's GPUs the arrivals ask for in all."""
PRIORITY = PRIORITY_OF_CLASS[DEFAULT_PRIORITY_CLASS]
Progress = Callable[[int], None]
"""Called with the number of pods arrived so far, now and then."""
PROGRESS_EVERY = 500
MAX_PREEMPTIONS = 4
"""Rounds of victims a pod may wait for (once some stop, the scheduler may name more: tasks
whose CPU depended on a GPU the first ones left), as the controller would schedule it again."""


@dataclass(frozen=True)
class Arrival:
    pod: OpenbPod
    vc: str


@dataclass
class InflationResult:
    """One replay. `arrived[i]` and `allocated[i]` are percentages of the cluster's GPUs after
    the i-th arrival; `vc_held[vc][i]` the GPUs the VC's own pods hold then."""

    policy: str
    seed: int
    gpus: int
    arrived: list[float] = field(default_factory=list)
    allocated: list[float] = field(default_factory=list)
    vcs: list[str] = field(default_factory=list)
    vc_held: dict[str, list[float]] = field(default_factory=dict)
    placed: int = 0
    preempted: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def allocation_at(self, percent: float) -> float:
        """The allocation rate when the arrived workload first reached `percent` (the last
        one recorded if it never did)."""
        index = bisect_left(self.arrived, percent)
        return self.allocated[min(index, len(self.allocated) - 1)]


def draw_arrivals(
    pods: Sequence[OpenbPod],
    gpus: int,
    seed: int,
    target: float = DEFAULT_TARGET,
    vc_weights: dict[str, int] | None = None,
) -> list[Arrival]:
    """Pods drawn with replacement until their GPUs reach `target` percent of `gpus`; each
    gets a VC drawn in proportion to `vc_weights` (default: all in the one VC `default`)."""
    if not any(pod.gpu_demand for pod in pods):
        raise ValueError("the pod list asks for no GPUs, so no workload can reach the target")
    rng = random.Random(seed)
    names = sorted(vc_weights) if vc_weights else [DEFAULT_VC]
    weights = [vc_weights[name] for name in names] if vc_weights else [1]
    wanted = target / 100 * gpus
    arrivals: list[Arrival] = []
    asked = 0.0
    while asked < wanted - 1e-9:
        pod = rng.choice(pods)
        vc = rng.choices(names, weights)[0]
        arrivals.append(Arrival(pod, vc))
        asked += pod.gpu_demand
    return arrivals


def replay_inflation(
    cluster: ClusterConfig,
    arrivals: Sequence[Arrival],
    policy_name: str,
    share_policy: SharePolicy,
    *,
    seed: int,
    overflow: bool = True,
    progress: Progress | None = None,
) -> InflationResult:
    """Place `arrivals` in order through PAI's scheduler (see the module docstring)."""
    scheduler = PaiScheduler(
        cluster, clock=lambda: 0.0, share_policy=share_policy, overflow=overflow
    )
    gpus = sum(len(node.leaf_indices) for node in cluster.nodes)
    vcs = sorted({arrival.vc for arrival in arrivals})
    result = InflationResult(policy_name, seed, gpus, vcs=vcs, vc_held={vc: [] for vc in vcs})
    held: dict[str, tuple[str, float, bool]] = {}  # group -> (vc, GPUs, guaranteed)
    vc_held = dict.fromkeys(vcs, 0.0)
    asked = allocated = 0.0
    started, cpu_started = time.perf_counter(), time.process_time()
    for index, arrival in enumerate(arrivals):
        name = f"pod-{index}"
        request = arrival.pod.request(name, arrival.vc, PRIORITY)
        decision = scheduler.schedule(request)
        for _ in range(MAX_PREEMPTIONS):
            if not isinstance(decision, Preempt):
                break
            for victim in decision.victims:
                scheduler.release(victim)
                vc, demand, guaranteed = held.pop(victim)
                allocated -= demand
                if guaranteed:
                    vc_held[vc] -= demand
                result.preempted += 1
            decision = scheduler.schedule(request)
        if isinstance(decision, Bind):
            scheduler.allocate(name, decision.placement)
            guaranteed = decision.placement.pods[0].cell_type is not None
            demand = arrival.pod.gpu_demand
            held[name] = (arrival.vc, demand, guaranteed)
            allocated += demand
            if guaranteed:
                vc_held[arrival.vc] += demand
            result.placed += 1
        else:
            scheduler.release(name)  # a reservation it could not use
        asked += arrival.pod.gpu_demand
        result.arrived.append(100 * asked / gpus)
        result.allocated.append(100 * allocated / gpus)
        for vc in vcs:
            result.vc_held[vc].append(vc_held[vc])
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress(index)
    result.seconds = time.perf_counter() - started
    result.cpu_seconds = time.process_time() - cpu_started
    return result


def guarantee_margins(shared: InflationResult, private: InflationResult) -> dict[str, float]:
    """Per VC, the least (over the VC's arrivals) of GPUs its pods hold on the shared cluster
    minus what they hold alone (`private`: the same arrivals replayed on private clusters)."""
    margins: dict[str, float] = {}
    for vc in shared.vcs:
        pairs = zip(shared.vc_held[vc], private.vc_held[vc], strict=True)
        margins[vc] = round(min((mine - alone for mine, alone in pairs), default=0.0), 3)
    return margins


@dataclass
class GuaranteeRun:
    """A replay with several VCs (`shared`, pods overflowing onto other VCs' idle GPUs), the
    same arrivals with each VC alone on its cells (`alone`), and per VC the least margin."""

    shared: InflationResult
    alone: InflationResult
    margins: dict[str, float]


def replay_with_vcs(
    cluster: ClusterConfig,
    arrivals: Sequence[Arrival],
    policy: Callable[[], SharePolicy],
    *,
    seed: int,
    progress: Progress | None = None,
) -> GuaranteeRun:
    """Replay `arrivals` (pods of several VCs) on `cluster` under PAI's policy with overflow,
    and on private clusters of each VC's cells without; `policy` makes a fresh policy."""
    shared = replay_inflation(cluster, arrivals, "pai", policy(), seed=seed, progress=progress)
    private = load_cluster(private_cluster(cluster), source="private clusters")
    alone = replay_inflation(private, arrivals, "alone", policy(), seed=seed, overflow=False)
    return GuaranteeRun(shared, alone, guarantee_margins(shared, alone))
