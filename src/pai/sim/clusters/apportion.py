"""Whole-number shares of a fixed total (nodes among VCs), proportional to weights."""

from __future__ import annotations

import math
from collections.abc import Mapping


def apportion(
    total: int, weights: Mapping[str, float], minimums: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Split `total` into whole parts proportional to `weights`, each at least its minimum.

    Largest-remainder (Hamilton) rounding, so parts sum exactly to `total` and each is within one
    of its exact proportional value. Names whose proportional part falls below their minimum are
    fixed at the minimum and the rest is re-split among the others. Ties go to the name that sorts
    first, so results are deterministic.
    """
    floors = dict(minimums or {})
    names = sorted(weights)
    if not names:
        raise ValueError("no names to apportion among")
    for name in names:
        weight = weights[name]
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight of {name!r} must be a finite number >= 0, got {weight}")
    unknown = sorted(set(floors) - set(weights))
    if unknown:
        raise ValueError(f"minimum given for names without a weight: {', '.join(unknown)}")
    if sum(floors.values()) > total:
        raise ValueError(f"the minimums add up to {sum(floors.values())}, more than {total}")

    fixed: dict[str, int] = {}
    while True:
        free = [name for name in names if name not in fixed]
        budget = total - sum(fixed.values())
        weight_sum = sum(weights[name] for name in free)
        exact = {
            name: budget * weights[name] / weight_sum if weight_sum else budget / len(free)
            for name in free
        }
        below = [name for name in free if exact[name] < floors.get(name, 0)]
        if not below:
            break
        fixed.update({name: floors[name] for name in below})

    parts = {name: math.floor(share) for name, share in exact.items()}
    leftover = budget - sum(parts.values())
    by_remainder = sorted(free, key=lambda name: (-(exact[name] - parts[name]), name))
    for name in by_remainder[:leftover]:
        parts[name] += 1
    return {name: fixed.get(name, parts.get(name, 0)) for name in names}
