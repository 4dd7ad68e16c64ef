"""Putting per-VC clocks on one cluster clock.

Some traces (the per-VC Philly lists) restart the clock at each VC's first job, so replaying all
VCs on one cluster needs an assumption about when each VC started. The strategies:

- ``"zero"``: every VC's first job at t=0, the default. It invents no dates: the raw Philly window
  is ~137 days and the large VCs span 94-129 days each, so whatever their true starts they ran
  side by side for most of their lives; starting together keeps that overlap (the contention under
  which sharing matters) without claiming to know more.
- ``"end"``: every VC's last submission at the same instant (the VCs ran until the trace snapshot).
- ``"spread"``: each VC starts at a uniformly random point that keeps it inside a window (by default
  the raw Philly window), seeded, for sensitivity studies over the unknown offsets.
- a mapping ``{vc: offset_s}``: explicit start offsets, one per VC, e.g. from outside knowledge.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from typing import Any, Literal

AlignmentName = Literal["zero", "end", "spread"]
Alignment = AlignmentName | Mapping[str, float]

ALIGNMENTS: tuple[AlignmentName, ...] = ("zero", "end", "spread")


def vc_windows(submissions: Iterable[tuple[str, float]]) -> dict[str, tuple[float, float]]:
    """First and last submission time of each VC, on that VC's own clock."""
    windows: dict[str, tuple[float, float]] = {}
    for vc, time_s in submissions:
        window = windows.get(vc)
        if window is None:
            windows[vc] = (time_s, time_s)
        elif time_s < window[0] or time_s > window[1]:
            windows[vc] = (min(window[0], time_s), max(window[1], time_s))
    return dict(sorted(windows.items()))


def start_offsets(
    windows: Mapping[str, tuple[float, float]],
    alignment: Alignment,
    *,
    window_s: float,
    seed: int,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Each VC's start time on the common clock, and a description of the choice for metadata."""
    spans = {vc: last - first for vc, (first, last) in windows.items()}
    if isinstance(alignment, Mapping):
        return _explicit_offsets(spans, alignment), {"alignment": "explicit"}
    if alignment == "zero":
        return dict.fromkeys(spans, 0.0), {"alignment": "zero"}
    if alignment == "end":
        longest = max(spans.values(), default=0.0)
        return {vc: longest - span for vc, span in spans.items()}, {"alignment": "end"}
    if alignment == "spread":
        rng = random.Random(seed)
        offsets = {vc: rng.uniform(0.0, max(window_s - span, 0.0)) for vc, span in spans.items()}
        return offsets, {"alignment": "spread", "seed": seed, "window_s": window_s}
    raise ValueError(
        f"unknown clock alignment {alignment!r}; use one of {', '.join(ALIGNMENTS)} "
        "or a mapping of VC name to start offset in seconds"
    )


def _explicit_offsets(spans: Mapping[str, float], given: Mapping[str, float]) -> dict[str, float]:
    missing = sorted(set(spans) - set(given))
    unknown = sorted(set(given) - set(spans))
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"no offset for VC(s) {', '.join(missing)}")
        if unknown:
            problems.append(f"offset for VC(s) not in the trace: {', '.join(unknown)}")
        raise ValueError("explicit clock alignment: " + "; ".join(problems))
    offsets: dict[str, float] = {}
    for vc in spans:
        offset = float(given[vc])
        if not math.isfinite(offset) or offset < 0:
            message = f"explicit clock alignment: VC {vc} needs an offset >= 0, got {offset}"
            raise ValueError(message)
        offsets[vc] = offset
    return offsets


def vc_clock_shifts(
    submissions: Iterable[tuple[str, float]],
    alignment: Alignment,
    *,
    window_s: float,
    seed: int = 0,
) -> tuple[dict[str, float], dict[str, Any]]:
    """What to add to each VC's submit times, and the `clock` metadata that records why."""
    windows = vc_windows(submissions)
    offsets, description = start_offsets(windows, alignment, window_s=window_s, seed=seed)
    shifts = {vc: offsets[vc] - first for vc, (first, _) in windows.items()}
    return shifts, {**description, "vc_start_offsets_s": offsets}
