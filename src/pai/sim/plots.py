"""PNG plots of replay results, drawn with matplotlib's object API on the Agg canvas (no display,
no global pyplot state), one series per replay: a policy, or a policy on a cluster."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pai.sim.metrics import (
    PRIVATE,
    binned_average,
    by_user,
    by_vc,
    light_users,
    percentile,
)
from pai.sim.results import ReplayResult

COLORS = {"hived": "#1f77b4", "hived-oppo": "#17becf", "quota": "#d62728", PRIVATE: "#7f7f7f"}
OTHER_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#bcbd22")
LINE_STYLES = ("-", "--", ":", "-.")
CDF_POINTS = 200
ALLOCATION_BINS = 400
DAY_S = 86_400.0
MINUTE_S = 60.0
SHORTEST_DELAY_MIN = 1 / 60  # delays below one second are drawn at one second on log axes


def series_labels(results: Sequence[ReplayResult]) -> list[str]:
    """`policy`, or `policy @ cluster` when the results span several clusters."""
    several = len({result.cluster for result in results}) > 1
    return [f"{r.policy} @ {r.cluster}" if several else r.policy for r in results]


def _style(results: Sequence[ReplayResult], index: int) -> dict[str, Any]:
    result = results[index]
    clusters = list(dict.fromkeys(r.cluster for r in results))
    color = COLORS.get(result.policy, OTHER_COLORS[index % len(OTHER_COLORS)])
    return {"color": color, "linestyle": LINE_STYLES[clusters.index(result.cluster) % 4]}


def _vcs(results: Sequence[ReplayResult]) -> list[str]:
    """VCs with finished jobs, largest quota first."""
    quota: dict[str, int] = {}
    for result in results:
        for vc in by_vc(result.jobs):
            quota[vc] = max(quota.get(vc, 0), result.quota_gpus.get(vc, 0))
    return sorted(quota, key=lambda vc: (-quota[vc], vc))


def _vc_label(results: Sequence[ReplayResult], vc: str, *, tick: bool = True) -> str:
    """The VC's name, with its quota when all results share one cluster."""
    if len({result.cluster for result in results}) > 1:
        return vc
    quota = results[0].quota_gpus.get(vc, 0)
    return f"{vc}\n{quota} GPUs" if tick else f"{vc} ({quota} GPUs)"


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def delay_by_vc(
    results: Sequence[ReplayResult], summaries: Sequence[Mapping[str, Any]], path: Path
) -> Path:
    """Grouped bars: each VC's mean queuing delay under each replay (log scale, minutes)."""
    vcs = _vcs(results)
    labels = series_labels(results)
    figure = Figure(figsize=(max(8.0, 0.9 * len(vcs) + 3), 4.8))
    axes = figure.add_subplot()
    width = 0.8 / max(len(results), 1)
    for index, summary in enumerate(summaries):
        means = [
            (summary["vcs"].get(vc, {}).get("queuing_delay_mean_s") or 0.0) / MINUTE_S for vc in vcs
        ]
        positions = [i + (index - (len(results) - 1) / 2) * width for i in range(len(vcs))]
        style = _style(results, index)
        axes.bar(
            positions,
            [max(mean, SHORTEST_DELAY_MIN) for mean in means],
            width,
            label=labels[index],
            color=style["color"],
            hatch="//" if style["linestyle"] != "-" else None,
        )
    axes.set_xticks(range(len(vcs)), [_vc_label(results, vc) for vc in vcs], fontsize=8)
    axes.set_yscale("log")
    axes.set_ylabel("mean queuing delay (minutes, log)")
    axes.set_title("Mean queuing delay per VC (VCs by quota, largest first)")
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def delay_cdf(results: Sequence[ReplayResult], path: Path) -> Path:
    """One panel per VC: the distribution (CDF) of its jobs' queuing delays under each replay."""
    vcs = _vcs(results)
    labels = series_labels(results)
    columns = min(4, max(len(vcs), 1))
    rows = max(math.ceil(len(vcs) / columns), 1)
    figure = Figure(figsize=(3.4 * columns, 2.7 * rows), layout="constrained")
    panels = figure.subplots(rows, columns, squeeze=False)
    grouped = [by_vc(result.jobs) for result in results]
    for position, vc in enumerate(vcs):
        axes: Axes = panels[position // columns][position % columns]
        for index, jobs_by_vc in enumerate(grouped):
            delays = sorted(r.queuing_delay_s / MINUTE_S for r in jobs_by_vc.get(vc, []))
            if not delays:
                continue
            fractions = [i / (CDF_POINTS - 1) for i in range(CDF_POINTS)]
            points = [max(percentile(delays, f), SHORTEST_DELAY_MIN) for f in fractions]
            axes.plot(
                points, fractions, label=labels[index], linewidth=1.4, **_style(results, index)
            )
        axes.set_xscale("log")
        axes.set_title(_vc_label(results, vc, tick=False), fontsize=9)
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
    for position in range(len(vcs), rows * columns):
        panels[position // columns][position % columns].set_visible(False)
    figure.supxlabel("queuing delay (minutes, log; below 1 s drawn at 1 s)", fontsize=9)
    figure.supylabel("fraction of the VC's jobs", fontsize=9)
    handles, names = panels[0][0].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside upper center", ncols=len(results), fontsize=8)
    return _save(figure, path)


def delay_by_user_weight(results: Sequence[ReplayResult], path: Path) -> Path:
    """Two panels, the light users' jobs and the others' (`metrics.light_users`): the share of
    their jobs that waited longer than each delay, under each replay (log scales, so that the
    waits fair share and limits move, a tail above the jobs that start at once, show)."""
    labels = series_labels(results)
    figure = Figure(figsize=(8.0, 3.0), layout="constrained")
    panels = figure.subplots(1, 2, squeeze=False)[0]
    for index, result in enumerate(results):
        users = by_user(result.jobs)
        light = light_users(users)
        for axes, chosen in ((panels[0], True), (panels[1], False)):
            delays = sorted(
                r.queuing_delay_s / MINUTE_S
                for key, jobs in users.items()
                if (key in light) == chosen
                for r in jobs
            )
            fractions = [i / (CDF_POINTS - 1) for i in range(CDF_POINTS - 1)]
            points = [percentile(delays, f) for f in fractions]
            shown = [(x, 1 - f) for x, f in zip(points, fractions, strict=True) if x > 0]
            if not shown:
                continue  # none of these jobs waited
            axes.plot(
                [x for x, _ in shown],
                [y for _, y in shown],
                label=labels[index],
                linewidth=1.4,
                **_style(results, index),
            )
    for axes, title in zip(panels, ("light users' jobs", "the other users' jobs"), strict=True):
        if axes.lines:
            axes.set_xscale("log")
            axes.set_yscale("log")
        else:
            axes.text(0.5, 0.5, "no job waited", ha="center", va="center", fontsize=9)
        axes.set_title(title, fontsize=9)
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
    figure.supxlabel("queuing delay (minutes, log)", fontsize=9)
    figure.supylabel("fraction of jobs waiting longer", fontsize=9)
    handles, names = panels[0].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside upper center", ncols=len(results), fontsize=8)
    return _save(figure, path)


def allocation_over_time(results: Sequence[ReplayResult], path: Path) -> Path:
    """Share of the cluster's GPUs held by jobs over the replay (time averages per bin)."""
    labels = series_labels(results)
    figure = Figure(figsize=(10, 4))
    axes = figure.add_subplot()
    start = min(result.start_s for result in results)
    end = max(result.end_s for result in results)
    for index, result in enumerate(results):
        times, values = result.allocation_series
        midpoints, averages = binned_average(times, values, start, end, ALLOCATION_BINS)
        axes.plot(
            [(t - start) / DAY_S for t in midpoints],
            [100 * a / result.gpus for a in averages],
            label=labels[index],
            linewidth=1.1,
            **_style(results, index),
        )
    axes.set_xlabel("days since the first submission")
    axes.set_ylabel("GPUs allocated (%)")
    axes.set_ylim(0, 100)
    axes.set_title("GPU allocation over time")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return _save(figure, path)


def anomaly_by_vc(
    results: Sequence[ReplayResult], summaries: Sequence[Mapping[str, Any]], path: Path
) -> Path:
    """Bars: each VC's mean queuing delay beyond its private cluster's, per shared policy."""
    vcs = _vcs(results)
    labels = series_labels(results)
    shown = [i for i, r in enumerate(results) if r.policy != PRIVATE]
    figure = Figure(figsize=(max(8.0, 0.9 * len(vcs) + 3), 4.4))
    axes = figure.add_subplot()
    width = 0.8 / max(len(shown), 1)
    for rank, index in enumerate(shown):
        extra = [
            (summaries[index]["vcs"].get(vc, {}).get("extra_delay_vs_private_s") or 0.0) / MINUTE_S
            for vc in vcs
        ]
        positions = [i + (rank - (len(shown) - 1) / 2) * width for i in range(len(vcs))]
        style = _style(results, index)
        axes.bar(
            positions,
            extra,
            width,
            label=labels[index],
            color=style["color"],
            hatch="//" if style["linestyle"] != "-" else None,
        )
    axes.set_xticks(range(len(vcs)), [_vc_label(results, vc) for vc in vcs], fontsize=8)
    axes.set_yscale("symlog", linthresh=1.0)
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_ylabel("mean delay beyond private (minutes)")
    axes.set_title("Sharing anomaly: queuing delay beyond each VC's private cluster (> 0 = worse)")
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


ZOOM_FROM = 85.0
"""Arrived workload (%) the right-hand plot of `allocation_by_arrival` starts at."""
SHARE_STYLES = {
    "pai": {"color": "#d62728", "linewidth": 2.2},
    "fgd": {"color": "#1f77b4", "linewidth": 1.6},
    "fgd-k8s": {"color": "#1f77b4", "linewidth": 1.2, "linestyle": ":"},
}


def allocation_by_arrival(
    curves: Mapping[str, Sequence[tuple[float, float]]], workload: str, seeds: int, path: Path
) -> Path:
    """Lines: the GPU allocation rate against the arrived workload (both % of the cluster's
    GPUs), one per placement policy, with the whole view and the end of the run side by side."""
    figure = Figure(figsize=(11, 4.4))
    whole, end = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    others = iter((*OTHER_COLORS, "#2ca02c", "#ff7f0e", "#17becf"))
    for name, points in curves.items():
        style = SHARE_STYLES.get(name) or {"color": next(others), "linewidth": 1.0}
        xs, ys = [x for x, _ in points], [y for _, y in points]
        whole.plot(xs, ys, label=name, **style)
        end.plot(xs, ys, label=name, **style)
    whole.plot([0, 100], [0, 100], color="#bbbbbb", linewidth=0.8, linestyle="--")
    last = max(x for points in curves.values() for x, _ in points)
    late = [y for points in curves.values() for x, y in points if x >= ZOOM_FROM]
    whole.set_xlim(0, last)
    whole.set_ylim(0, 100)
    end.set_xlim(ZOOM_FROM, last)
    end.set_ylim(math.floor(min(late)) - 1, math.ceil(max(late)) + 1)
    for axes in (whole, end):
        axes.set_xlabel("arrived workload (% of the cluster's GPUs)")
        axes.grid(alpha=0.3)
    whole.set_ylabel("GPUs allocated (%)")
    end.set_title(f"from {ZOOM_FROM:g} % on")
    whole.set_title(f"{workload}: mean of {seeds} seed{'s' if seeds > 1 else ''}")
    end.legend(fontsize=8, loc="lower right")
    return _save(figure, path)
