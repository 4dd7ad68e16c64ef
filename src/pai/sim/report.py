"""The markdown report of an evaluation: what was replayed, the comparison tables, the plots."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pai.sim.metrics import LARGE_JOB_GPUS, PRIVATE
from pai.sim.plots import series_labels
from pai.sim.results import ReplayResult
from pai.sim.traces import Trace

DAY_S = 86_400.0
NONE = "-"
USER_COLUMNS = ("mean delay, light users (min)", "p95 delay, light users (min)", "Jain's index")


def _minutes(seconds: float | None) -> str:
    return NONE if seconds is None else f"{seconds / 60:,.1f}"


def _percent(rate: float | None) -> str:
    return NONE if rate is None else f"{100 * rate:.1f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _trace_section(trace: Trace, results: Sequence[ReplayResult]) -> list[str]:
    metadata = trace.metadata
    clock = metadata.get("clock", {})
    lines = [
        "## What was replayed",
        "",
        f"- Trace `{trace.name}` ({metadata.get('format', 'unknown format')}): {len(trace):,} jobs "
        f"of {len(trace.vcs)} VCs submitted over {trace.span_s / DAY_S:,.1f} days; clock "
        f"alignment `{clock.get('alignment', 'as recorded')}`.",
    ]
    lines += [f"- Trace assumption: {text}" for text in metadata.get("assumptions", [])]
    clusters: dict[str, int] = {}
    for result in results:
        clusters.setdefault(result.cluster, result.gpus)
    for label, gpus in clusters.items():
        vcs = len(next(r for r in results if r.cluster == label).quota_gpus)
        lines.append(f"- Cluster `{label}`: {gpus:,} GPUs shared by {vcs} VCs.")
    lines += [
        "- Each job is one gang of equal pods, each on one node; it runs for its trace duration "
        "wherever it is placed; a preempted job is retried from the start, or under `pai` from "
        "its last checkpoint.",
        "",
    ]
    return lines


def _summary_table(
    results: Sequence[ReplayResult], summaries: Sequence[Mapping[str, Any]]
) -> list[str]:
    labels = series_labels(results)
    with_users = any(s.get("users") for s in summaries)
    rows = [
        [
            f"`{label}`",
            f"{s['jobs']:,}",
            str(s["refused_jobs"]),
            _percent(s["gpu_allocation_rate"]),
            _minutes(s["queuing_delay_mean_s"]),
            _minutes(s["queuing_delay_p95_s"]),
            _minutes(s["jct_mean_s"]),
            f"{_minutes(s['large_queuing_delay_p99_s'])} / "
            f"{_minutes(s['large_queuing_delay_max_s'])}",
            _minutes(s["max_sharing_anomaly_s"]),
            f"{s['preemptions']:,}"
            + (f" ({s['preempted_gpu_hours']:,.0f} GPU-h lost)" if s["preemptions"] else ""),
            NONE
            if s["idle_gpus_while_waiting"] is None
            else f"{s['idle_gpus_while_waiting']:,.0f}",
            NONE if s["fragmented_gpus"] is None else f"{s['fragmented_gpus']:,.0f}",
            *(
                [
                    _minutes(s["light_users_queuing_delay_mean_s"]),
                    _minutes(s["light_users_queuing_delay_p95_s"]),
                    NONE if s["jain_fairness_index"] is None else f"{s['jain_fairness_index']:.3f}",
                ]
                if with_users
                else []
            ),
        ]
        for label, s in zip(labels, summaries, strict=True)
    ]
    header = [
        "policy",
        "jobs",
        "refused",
        "GPU allocation",
        "mean delay (min)",
        "p95 delay (min)",
        "mean JCT (min)",
        f"p99 / max delay, {LARGE_JOB_GPUS}+ GPU jobs (min)",
        "worst VC anomaly (min)",
        "preemptions",
        "idle GPUs while jobs wait",
        "fragmented GPUs",
        *(USER_COLUMNS if with_users else ()),
    ]
    return ["## Summary", "", *_table(header, rows), ""]


def _gpus(value: float | None) -> str:
    return NONE if value is None else f"{value:,.0f}"


def _per_vc_table(
    title: str,
    results: Sequence[ReplayResult],
    summaries: Sequence[Mapping[str, Any]],
    key: str,
    shown: Sequence[int],
    show: Callable[[float | None], str] = _minutes,
) -> list[str]:
    labels = series_labels(results)
    vcs = sorted(
        {vc for s in summaries for vc in s["vcs"]},
        key=lambda vc: (-results[0].quota_gpus.get(vc, 0), vc),
    )
    rows = []
    for vc in vcs:
        first = summaries[0]["vcs"].get(vc, {})
        cells = [show(summaries[i]["vcs"].get(vc, {}).get(key)) for i in shown]
        rows.append(
            [f"`{vc}`", str(first.get("quota_gpus", 0)), f"{first.get('jobs', 0):,}", *cells]
        )
    header = ["VC", "quota GPUs", "jobs", *(f"`{labels[i]}`" for i in shown)]
    return [f"## {title}", "", *_table(header, rows), ""]


def render_report(
    trace: Trace,
    results: Sequence[ReplayResult],
    summaries: Sequence[Mapping[str, Any]],
    images: Mapping[str, str],
    command: str | None = None,
) -> str:
    """The report; `images` maps a caption to a PNG path relative to the report."""
    everything = list(range(len(results)))
    shared = [i for i, r in enumerate(results) if r.policy != PRIVATE]
    lines = [f"# Scheduling simulation: `{trace.name}`", ""]
    if command:
        lines += ["Regenerate with:", "", "```", command, "```", ""]
    lines += _trace_section(trace, results)
    lines += _summary_table(results, summaries)
    lines += _per_vc_table(
        "Mean queuing delay per VC (minutes)",
        results,
        summaries,
        "queuing_delay_mean_s",
        everything,
    )
    lines += _per_vc_table(
        "95th percentile queuing delay per VC (minutes)",
        results,
        summaries,
        "queuing_delay_p95_s",
        everything,
    )
    if len(shared) < len(results):
        lines += _per_vc_table(
            "Sharing anomaly per VC: mean queuing delay beyond its private cluster (minutes)",
            results,
            summaries,
            "sharing_anomaly_s",
            shared,
        )
    lines += _per_vc_table(
        f"99th percentile queuing delay of {LARGE_JOB_GPUS}+ GPU jobs per VC (minutes)",
        results,
        summaries,
        "large_queuing_delay_p99_s",
        everything,
    )
    lines += _per_vc_table(
        f"Longest queuing delay of a {LARGE_JOB_GPUS}+ GPU job per VC (minutes)",
        results,
        summaries,
        "large_queuing_delay_max_s",
        everything,
    )
    lines += _per_vc_table(
        "Idle GPUs while the VC's jobs wait (time average over the replay)",
        results,
        summaries,
        "idle_gpus_while_waiting",
        everything,
        _gpus,
    )
    lines += _per_vc_table(
        "GPU-hours of the VC's work lost to preemption",
        results,
        summaries,
        "preempted_gpu_hours",
        shared,
        _gpus,
    )
    if any(s.get("users") for s in summaries):
        lines += _per_vc_table(
            "95th percentile queuing delay of the light users' jobs per VC (minutes)",
            results,
            summaries,
            "light_users_queuing_delay_p95_s",
            everything,
        )
    lines += ["## Plots", ""]
    for caption, image in images.items():
        lines += [f"![{caption}]({image})", ""]
    lines += [
        "## Definitions",
        "",
        "- Queuing delay: from submission until the job first ran. JCT: from submission to "
        "completion. Jobs that could never fit their VC are refused and left out.",
        "- Sharing anomaly: a VC's mean queuing delay beyond the same jobs' on a private cluster "
        "of exactly its cells (policy `private`); zero when not beyond.",
        "- GPU allocation: GPU-time held by jobs over GPUs times the replay's window (first "
        "submission to last completion).",
        "- Idle GPUs while jobs wait: time-averaged free GPUs while some job waited. Fragmented "
        "GPUs: time-averaged free GPUs on nodes with fewer free GPUs than the smallest waiting "
        "pod needs. Per VC: free GPUs anywhere in the cluster while a job of that VC waited.",
        f"- {LARGE_JOB_GPUS}+ GPU jobs: jobs of at least {LARGE_JOB_GPUS} GPUs, the ones a stream "
        "of small jobs can starve; their 99th percentile and longest queuing delay.",
        "- GPU-hours lost: GPU time of preempted attempts that no checkpoint saved (all of it when "
        "the policy restarts preempted jobs from scratch), counted against the victim's VC.",
        "- Light users: the half of each VC's users whose jobs demand the fewest GPU-hours. "
        "Jain's index: over users, of x = GPU time got / GPU time demanded while in the system "
        "(sum of GPUs x run time over sum of GPUs x time from submission to end); 1 when every "
        "user fares alike.",
        "",
    ]
    return "\n".join(lines)
