"""Replaying one trace through several policies on one or more clusters, and writing the report,
the plots and the JSON results."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pai.cluster import ClusterConfig
from pai.sim import plots
from pai.sim.engine import Progress, replay
from pai.sim.metrics import PRIVATE, summarize_all
from pai.sim.policies import make_policy
from pai.sim.report import render_report
from pai.sim.results import ReplayResult
from pai.sim.traces import Trace
from pai.sim.workload import largest_pods

ProgressFactory = Callable[[str, int], Progress]
"""Given a replay's description and its number of jobs, the callback that reports its progress."""

REPORT = "report.md"
RESULTS = "results.json"


@dataclass(frozen=True)
class Evaluation:
    trace: Trace
    results: list[ReplayResult]
    summaries: list[dict[str, Any]]


def evaluate(
    trace: Trace,
    clusters: Mapping[str, ClusterConfig],
    policies: Sequence[str],
    *,
    progress: ProgressFactory | None = None,
) -> Evaluation:
    """Replay `trace` through every policy on every cluster (label -> cluster), in that order.

    Every cluster is checked against the trace first, so a mismatch fails before any replay.
    """
    if not trace.jobs:
        raise ValueError(f"trace {trace.name!r} has no jobs to replay")
    policies = list(dict.fromkeys(policies))
    for cluster in clusters.values():
        largest_pods(cluster, trace.vcs)
    results = []
    for label, cluster in clusters.items():
        for name in policies:
            policy = make_policy(name, cluster)
            reporter = progress(f"{name} on {label}", len(trace)) if progress else None
            results.append(replay(trace, policy, cluster_label=label, progress=reporter))
    return Evaluation(trace, results, summarize_all(results))


def write_outputs(
    evaluation: Evaluation, directory: Path, *, command: str | None = None
) -> list[Path]:
    """Write the plots, `report.md` and `results.json` into `directory`; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    results, summaries = evaluation.results, evaluation.summaries
    images = {
        "Mean queuing delay per VC": plots.delay_by_vc(
            results, summaries, directory / "queuing_delay_by_vc.png"
        ),
        "Queuing delay distribution per VC": plots.delay_cdf(
            results, directory / "queuing_delay_cdf.png"
        ),
        "GPU allocation over time": plots.allocation_over_time(
            results, directory / "gpu_allocation.png"
        ),
    }
    if any(summary.get("users") for summary in summaries):
        images["Queuing delay of light users' jobs and of the others'"] = (
            plots.delay_by_user_weight(results, directory / "queuing_delay_by_user_weight.png")
        )
    if any(result.policy == PRIVATE for result in results) and any(
        result.policy != PRIVATE for result in results
    ):
        images["Sharing anomaly per VC"] = plots.anomaly_by_vc(
            results, summaries, directory / "sharing_anomaly.png"
        )
    report = directory / REPORT
    relative = {caption: path.name for caption, path in images.items()}
    report.write_text(
        render_report(evaluation.trace, results, summaries, relative, command), encoding="utf-8"
    )
    data = directory / RESULTS
    data.write_text(json.dumps(summaries, indent=2) + "\n", encoding="utf-8")
    return [*images.values(), report, data]
