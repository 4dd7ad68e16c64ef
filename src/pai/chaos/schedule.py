"""A seeded schedule of faults: which, on what, when, and for how long.

Faults arrive as a Poisson process (one every `MEAN_GAP` seconds on average) and overlap
freely, except that one target (a host, an API worker, the controllers, the store) takes one
fault at a time: the runner holds a fault back until its target is free again. The same seed
and duration give the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MEAN_GAP = 12.0
"""Seconds between two faults on average: about 150 in 30 minutes."""
FIRST_AFTER = 5.0


@dataclass(frozen=True)
class FaultKind:
    name: str
    weight: int
    targets: tuple[str, ...]
    hold: tuple[float, float]
    """Seconds the fault lasts before it is undone (a process started again, a link up)."""


HOSTS = ("w1", "w2", "w3")
FAULT_KINDS = (
    FaultKind("controller-kill", 3, ("controller",), (1.0, 5.0)),
    FaultKind("api-kill", 3, ("api-1", "api-2"), (1.0, 5.0)),
    FaultKind("agent-kill", 2, HOSTS, (0.0, 0.0)),
    FaultKind("host-loss", 2, HOSTS, (5.0, 30.0)),
    FaultKind("link-cut", 2, HOSTS, (10.0, 60.0)),
    FaultKind("store-stop", 2, ("store",), (2.0, 10.0)),
    FaultKind("disk-fill", 2, HOSTS, (10.0, 40.0)),
)
BY_NAME = {kind.name: kind for kind in FAULT_KINDS}


@dataclass(frozen=True)
class PlannedFault:
    at: float
    """Seconds after the run's start."""
    fault: str
    target: str
    hold: float


def plan(
    seed: int, seconds: float, kinds: tuple[FaultKind, ...] = FAULT_KINDS
) -> list[PlannedFault]:
    """The faults of a run of `seconds`, from `seed`."""
    rng = random.Random(seed)
    planned = []
    at = FIRST_AFTER
    while at < seconds:
        kind = rng.choices(kinds, [kind.weight for kind in kinds])[0]
        target = rng.choice(kind.targets)
        planned.append(
            PlannedFault(round(at, 2), kind.name, target, round(rng.uniform(*kind.hold), 1))
        )
        at += rng.expovariate(1 / MEAN_GAP)
    return planned
