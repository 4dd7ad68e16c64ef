"""The placement policies an inflation replay compares, as `SharePolicy`s of PAI's scheduler.

The baselines are those of the ATC'23 paper "Beware of Fragmentation" (Weng et al.), written here
from its description; each picks a node and a GPU on it (the scheduler asks node by node):

- ``random``: any node and GPU that fit, uniformly (seeded);
- ``best-fit``: the node left with the least CPU and GPU (each over the largest node's, weighted
  alike), then the GPU left with the least;
- ``dot-product``: Tetris's alignment, the node whose free CPU and GPU have the smallest dot
  product with the task's demand (each over the largest node's); the GPU as best-fit;
- ``gpu-packing``: a GPU already shared (the fullest first), else a free GPU of a node already in
  use (the fewest free GPUs first), else an idle node;
- ``gpu-clustering``: a node whose tasks all take the task's share size, then a node where some
  do, then an idle node, then any; the fullest first, and on it the GPU as best-fit;
- ``fgd``: fragmentation gradient descent: the node and GPU whose fragmentation (the paper's
  measure: CPU and GPU, the workload being the pod list's kinds of pods by how often each comes)
  rises least;
- ``fgd-k8s``: the same measure scored as the authors' simulator does on Kubernetes' scheduler
  framework: integer node scores (100 x sigmoid of the drop / 1000), ties broken at random;
- ``pai``: PAI's own, `pai.scheduler.fragmentation.FragmentationPolicy`, which learns the
  workload from the tasks it places.

Tasks asking for several whole GPUs are placed by HiveD's own packing under every policy (they
never share a GPU); they are 1 % of the published pod lists.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pai.scheduler.fragmentation import (
    Fragmentation,
    FragmentationPolicy,
    TaskKind,
    offer_state,
    state_after,
)
from pai.scheduler.gpushare import NodeOffer, PodAsk, Score, SharePolicy
from pai.scheduler.types import GPU_MILLI
from pai.sim.openb import OpenbPod


@dataclass(frozen=True)
class ClusterScale:
    """The largest node's CPU (thousandths of a core) and GPUs (thousandths): what scores that
    add CPU and GPU divide each by."""

    cpu_milli: int
    gpu_milli: int


class _Baseline:
    pure = True
    version = 0

    def observe(self, group: str, asks: Sequence[PodAsk]) -> None:
        """The baselines know nothing of the workload but what `fgd` is given."""


def _tightest(offer: NodeOffer, ask: PodAsk, usable: list[int]) -> int:
    """The slot left with the least once `ask` takes it (a shared GPU before a free one)."""
    return min(usable, key=lambda i: (offer.slots[i].free_milli, not offer.slots[i].shared, i))


def _gpu_free(offer: NodeOffer) -> int:
    return sum(slot.free_milli for slot in offer.slots)


class RandomFit(_Baseline):
    pure = False

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        return (self._rng.random(),), self._rng.choice(usable)


class _NodeScore(_Baseline, ABC):
    """A baseline that scores nodes alone and takes the tightest GPU on the best one."""

    def __init__(self, scale: ClusterScale) -> None:
        self.scale = scale

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        return (round(self.node_score(offer, ask), 9),), _tightest(offer, ask, usable)

    @abstractmethod
    def node_score(self, offer: NodeOffer, ask: PodAsk) -> float:
        """Lower is better."""


class BestFit(_NodeScore):
    def node_score(self, offer: NodeOffer, ask: PodAsk) -> float:
        cpu_left = (offer.cpu_free - ask.cpu_milli) / self.scale.cpu_milli
        gpu_left = (_gpu_free(offer) - ask.milli) / self.scale.gpu_milli
        return 0.5 * cpu_left + 0.5 * gpu_left


class DotProduct(_NodeScore):
    def node_score(self, offer: NodeOffer, ask: PodAsk) -> float:
        cpu, gpu = self.scale.cpu_milli, self.scale.gpu_milli
        return (ask.cpu_milli / cpu) * (offer.cpu_free / cpu) + (ask.milli / gpu) * (
            _gpu_free(offer) / gpu
        )


class GpuPacking(_Baseline):
    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        index = _tightest(offer, ask, usable)
        slot = offer.slots[index]
        whole = sum(1 for s in offer.slots if s.free_milli == GPU_MILLI)
        if slot.free_milli < GPU_MILLI:
            return (0, slot.free_milli), index
        if whole < offer.gpus:
            return (1, whole), index
        return (2, whole), index


class GpuClustering(_Baseline):
    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        if not ask.milli:
            return (0, 0), usable[0]  # a task without GPU has no kind to cluster with
        sizes = {size for slot in offer.slots for size in slot.sizes}
        busy = len(offer.slots) < offer.gpus or sizes
        if sizes == {ask.milli}:
            rank = 0
        elif ask.milli in sizes:
            rank = 1
        elif not busy:
            rank = 2
        else:
            rank = 3
        same = [i for i in usable if ask.milli in offer.slots[i].sizes]
        return (rank, _gpu_free(offer)), _tightest(offer, ask, same or usable)


class FragmentationDescent(_Baseline):
    """FGD: the workload is fixed, from the pod list; memory plays no part (the paper's)."""

    def __init__(self, kinds: Iterable[tuple[TaskKind, float]]) -> None:
        self.measure = Fragmentation(kinds, memory=False)

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        usable = offer.usable_slots(ask)
        if not usable:
            return None
        state = offer_state(offer)
        before = self.measure.of(state)
        rises = [
            (self.measure.of(state_after(state, offer.slots[i].free_milli, ask)) - before, i)
            for i in usable
        ]
        rise, index = min(rises)
        return (round(rise, 6),), index


class KubernetesFgd(FragmentationDescent):
    """FGD as the authors' simulator runs it on Kubernetes' scheduler framework: a node's score
    is an integer, 100 x sigmoid(fragmentation drop / 1000), and among the nodes of the highest
    score one is picked at random."""

    pure = False

    def __init__(self, kinds: Iterable[tuple[TaskKind, float]], seed: int) -> None:
        super().__init__(kinds)
        self._rng = random.Random(seed)

    def choose(self, offer: NodeOffer, ask: PodAsk) -> tuple[Score, int] | None:
        found = super().choose(offer, ask)
        if found is None:
            return None
        (rise,), index = found
        node_score = int(100 / (1 + math.exp(min(rise / 1000, 700))))
        return (-node_score, self._rng.random()), index


def pod_kinds(pods: Iterable[OpenbPod]) -> list[tuple[TaskKind, float]]:
    """The pod list's kinds of pods (GPUs, share, CPU, memory) by how often each comes."""
    counts = Counter(
        (
            min(pod.gpus, 1) if pod.gpus <= 1 else pod.gpus,
            pod.gpu_milli,
            pod.cpu_milli,
            pod.memory_mb,
        )
        for pod in pods
    )
    return [(kind, float(count)) for kind, count in counts.items()]


def _pai(pods: Sequence[OpenbPod], scale: ClusterScale, seed: int) -> SharePolicy:
    return FragmentationPolicy()


SHARE_POLICIES: dict[str, Callable[[Sequence[OpenbPod], ClusterScale, int], SharePolicy]] = {
    "random": lambda pods, scale, seed: RandomFit(seed),
    "best-fit": lambda pods, scale, seed: BestFit(scale),
    "dot-product": lambda pods, scale, seed: DotProduct(scale),
    "gpu-packing": lambda pods, scale, seed: GpuPacking(),
    "gpu-clustering": lambda pods, scale, seed: GpuClustering(),
    "fgd": lambda pods, scale, seed: FragmentationDescent(pod_kinds(pods)),
    "fgd-k8s": lambda pods, scale, seed: KubernetesFgd(pod_kinds(pods), seed),
    "pai": _pai,
}
"""Policy name -> how to build it from the pod list, the cluster's scale and the seed."""


def make_share_policy(
    name: str, pods: Sequence[OpenbPod], scale: ClusterScale, seed: int
) -> SharePolicy:
    build = SHARE_POLICIES.get(name)
    if build is None:
        raise ValueError(f"unknown policy {name!r}; policies: {', '.join(SHARE_POLICIES)}")
    return build(pods, scale, seed)
