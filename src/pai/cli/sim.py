"""`pai sim`: replay a job trace through PAI's scheduler and baselines, in virtual time, and
report per-VC queuing delays, sharing anomalies and GPU allocation."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pai.cli.formatting import NONE, table
from pai.cli.session import ServerOption, comma_list, connect, err, out
from pai.cluster import ClusterConfig, cluster_from_file, load_cluster
from pai.sim.clusters import itp_cluster, philly_cluster
from pai.sim.engine import Progress as ProgressCallback
from pai.sim.evaluation import Evaluation, evaluate, write_outputs
from pai.sim.history import fetch_history, trace_from_jobs
from pai.sim.policies import POLICIES, SHARING, known_policy
from pai.sim.traces import (
    ALIGNMENTS,
    TRACE_KINDS,
    Trace,
    detect_kind,
    load_trace,
    write_trace_csv,
)
from pai.sim.users import DEFAULT_USERS_PER_VC, with_users
from pai.sim.usersharing import limit_each_user
from pai.sim.workload import scale_load

NAMED_CLUSTERS = ("philly", "itp")
DEFAULT_CLUSTER = {"philly-vc": "philly", "itp": "itp"}
DEFAULT_POLICIES = "pai,hived,quota,private"
DEFAULT_OUT = Path("sim-report")


class SimError(Exception):
    """A `pai sim` argument that cannot work; the message says which and why."""


def _load_trace(source: str, kind: str | None, alignment: str | None) -> Trace:
    if kind is not None and kind not in TRACE_KINDS:
        raise SimError(f"--trace-kind {kind!r}: use one of {', '.join(TRACE_KINDS)}")
    is_philly_vc = kind == "philly-vc" or (
        kind is None and (source == "philly-vc" or _detected(source) == "philly-vc")
    )
    if alignment is not None and not is_philly_vc:
        raise SimError("--alignment applies to the per-VC Philly trace (philly-vc) only")
    if alignment is not None and alignment not in ALIGNMENTS:
        raise SimError(f"--alignment {alignment!r}: use one of {', '.join(ALIGNMENTS)}")
    options: dict[str, Any] = {"alignment": alignment} if alignment is not None else {}
    return load_trace(source, kind=kind, **options)


def _detected(source: str) -> str | None:
    path = Path(source)
    return detect_kind(path) if path.is_file() else None


def _cluster(spec: str) -> tuple[str, ClusterConfig]:
    """A named evaluation cluster or a cluster file, with the label results carry."""
    if spec == "philly":
        return spec, load_cluster(philly_cluster(), source="the Philly evaluation cluster")
    if spec == "itp":
        return spec, load_cluster(itp_cluster(), source="the ITP evaluation cluster")
    path = Path(spec)
    if not path.is_file():
        raise SimError(
            f"--cluster {spec!r}: no such file (named clusters: {', '.join(NAMED_CLUSTERS)})"
        )
    return path.stem, cluster_from_file(path)


def _policies(value: str) -> list[str]:
    names = comma_list([value])
    unknown = [name for name in names if not known_policy(name)]
    if unknown or not names:
        raise SimError(
            f"--policies {value!r}: unknown policy {', '.join(unknown) or '(none given)'}; "
            f"policies: {', '.join(POLICIES)}, each optionally with "
            f"{' and '.join('+' + part for part in SHARING)}"
        )
    return names


def _select(trace: Trace, vcs: list[str], limit: int | None) -> Trace:
    if vcs:
        trace = trace.select_vcs(vcs)
    if limit is not None:
        trace = Trace(trace.name, trace.jobs[:limit], {**trace.metadata, "limit": limit})
    return trace


@contextlib.contextmanager
def _progress(show: bool) -> Iterator[Any]:
    """A Rich progress display on standard error (only on a terminal), and a factory of
    per-replay callbacks for `evaluate`."""
    if not show:
        yield None
        return
    display = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err(),
        transient=True,
    )

    def factory(description: str, total: int) -> ProgressCallback:
        task = display.add_task(description, total=total)

        def advance(done: int, _: int) -> None:
            display.update(task, completed=done)

        return advance

    with display:
        yield factory


def _command(options: SimOptions, clusters: list[str]) -> str:
    """The `pai sim` command line that regenerates these outputs."""
    words = ["pai", "sim"]
    if options.from_history:
        words.append("--from-history")
    else:
        words += ["--trace", options.trace or ""]
    for flag, value in (
        ("--trace-kind", options.trace_kind),
        ("--alignment", options.alignment),
        ("--vcs", ",".join(options.vcs)),
        ("--limit", str(options.limit or "")),
        ("--load-factor", f"{options.load_factor:g}" if options.load_factor != 1 else ""),
        (
            "--users-per-vc",
            str(options.users_per_vc) if options.users_per_vc != DEFAULT_USERS_PER_VC else "",
        ),
        ("--user-limit-share", f"{options.user_limit_share:g}" if options.user_limit_share else ""),
        ("--cluster", clusters[0]),
        ("--compare-cluster", clusters[1] if len(clusters) > 1 else ""),
        ("--policies", options.policies),
        ("--out", str(options.out_dir)),
    ):
        if value:
            words += [flag, value]
    return shlex.join(words)


def _summary_table(evaluation: Evaluation) -> Any:
    users = any(summary.get("users") for summary in evaluation.summaries)
    result = table(
        "POLICY", "CLUSTER", "JOBS", "GPU ALLOC", "MEAN DELAY", "P95 DELAY", "MEAN JCT",
        "WORST ANOMALY", *(("LIGHT USERS P95", "JAIN") if users else ()),
    )  # fmt: skip
    for summary in evaluation.summaries:
        jain = summary.get("jain_fairness_index")
        result.add_row(
            summary["policy"],
            summary["cluster"],
            f"{summary['jobs']:,}",
            _percent(summary["gpu_allocation_rate"]),
            _minutes(summary["queuing_delay_mean_s"]),
            _minutes(summary["queuing_delay_p95_s"]),
            _minutes(summary["jct_mean_s"]),
            _minutes(summary["max_sharing_anomaly_s"]),
            *(
                (
                    _minutes(summary["light_users_queuing_delay_p95_s"]),
                    NONE if jain is None else f"{jain:.3f}",
                )
                if users
                else ()
            ),
        )
    return result


def _minutes(seconds: float | None) -> str:
    return NONE if seconds is None else f"{seconds / 60:,.1f} min"


def _percent(rate: float | None) -> str:
    return NONE if rate is None else f"{100 * rate:.1f}%"


@dataclass(frozen=True)
class SimOptions:
    trace: str | None
    trace_kind: str | None
    alignment: str | None
    from_history: bool
    export_history: Path | None
    cluster: str | None
    compare_cluster: str | None
    policies: str
    vcs: list[str]
    limit: int | None
    load_factor: float
    users_per_vc: int
    user_limit_share: float | None
    out_dir: Path
    as_json: bool
    server: str | None


def sim(
    trace: Annotated[
        str | None,
        typer.Option(
            "--trace",
            help="A shipped trace (philly-vc, itp) or a trace file (format detected, or "
            "--trace-kind).",
        ),
    ] = None,
    trace_kind: Annotated[
        str | None,
        typer.Option("--trace-kind", help=f"Format of the trace file: {', '.join(TRACE_KINDS)}."),
    ] = None,
    alignment: Annotated[
        str | None,
        typer.Option(
            "--alignment",
            help="philly-vc only: how the VCs' clocks are aligned (zero, end, spread).",
        ),
    ] = None,
    from_history: Annotated[
        bool,
        typer.Option(
            "--from-history",
            help="Replay this PAI server's own job history (GET /api/v2/jobs) instead.",
        ),
    ] = False,
    export_history: Annotated[
        Path | None,
        typer.Option(
            "--export-history",
            help="With --from-history: write the history as a trace CSV (PAI's format).",
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Cluster file, or philly / itp for the evaluation clusters (default: the "
            "shipped trace's own).",
        ),
    ] = None,
    compare_cluster: Annotated[
        str | None,
        typer.Option(
            "--compare-cluster", help="Also replay on this cluster (what-if), side by side."
        ),
    ] = None,
    policies: Annotated[
        str,
        typer.Option(
            "--policies",
            help=f"Comma-separated, from: {', '.join(POLICIES)}; each may add +fair (fair "
            "share between a VC's users) and/or +limits (limits per user), e.g. pai+fair.",
        ),
    ] = DEFAULT_POLICIES,
    vcs: Annotated[
        list[str] | None,
        typer.Option("--vcs", help="Replay only these VCs' jobs (repeatable, or comma-separated)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Replay only the first N jobs.")
    ] = None,
    load_factor: Annotated[
        float,
        typer.Option(
            "--load-factor", help="What-if: jobs arrive this many times as fast as recorded."
        ),
    ] = 1.0,
    users_per_vc: Annotated[
        int,
        typer.Option(
            "--users-per-vc",
            min=1,
            help="For a trace without users: how many users each VC's jobs are dealt to "
            "(bursts of one size are one user's; see docs/evaluation.md).",
        ),
    ] = DEFAULT_USERS_PER_VC,
    user_limit_share: Annotated[
        float | None,
        typer.Option(
            "--user-limit-share",
            help="What-if: every VC's userLimit is this share (0-1] of its guaranteed GPUs "
            "(for +limits; otherwise the cluster file's userLimit).",
        ),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for report.md, the PNG plots and results.json.")
    ] = DEFAULT_OUT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the results as JSON, one object per replay.")
    ] = False,
    server: ServerOption = None,
) -> None:
    """Replay a job trace through PAI's scheduler and baselines in virtual time.

    pai: PAI's default: hived-oppo, with preempted jobs resuming from their last checkpoint and
    reservations with backfill for jobs that waited too long.
    hived: HiveD's guarantees alone, every job in its VC's cells.
    hived-oppo: the same, and jobs overflow onto idle cells as opportunistic jobs.
    quota: GPU-count quotas without topology, placed anywhere (the baseline).
    private: each VC alone on its share (the reference of the sharing anomaly).
    +fair, +limits (e.g. pai+fair+limits): a VC shared between its users by fair share and by
    limits per user, as the controller does.
    """
    options = SimOptions(
        trace=trace,
        trace_kind=trace_kind,
        alignment=alignment,
        from_history=from_history,
        export_history=export_history,
        cluster=cluster,
        compare_cluster=compare_cluster,
        policies=policies,
        vcs=comma_list(vcs),
        limit=limit,
        load_factor=load_factor,
        users_per_vc=users_per_vc,
        user_limit_share=user_limit_share,
        out_dir=out_dir,
        as_json=as_json,
        server=server,
    )
    try:
        _run(options)
    except (SimError, ValueError, OSError) as error:
        text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        typer.echo(f"error: {text}", err=True)
        raise typer.Exit(1) from None


def _run(options: SimOptions) -> None:
    if options.from_history == (options.trace is not None):
        raise SimError("give either --trace or --from-history")
    if options.export_history is not None and not options.from_history:
        raise SimError("--export-history needs --from-history")
    names = _policies(options.policies)
    if options.from_history:
        with connect(options.server) as client:
            trace = trace_from_jobs(fetch_history(client), source=f"job history of {client.server}")
        if options.export_history is not None:
            write_trace_csv(trace, options.export_history)
            skipped = ", ".join(f"{why}: {n}" for why, n in trace.metadata["skipped"].items())
            err().print(
                f"wrote {len(trace):,} jobs to {options.export_history}"
                + (f" (skipped {skipped})" if skipped else "")
            )
            if options.cluster is None:
                return
    else:
        assert options.trace is not None
        trace = _load_trace(options.trace, options.trace_kind, options.alignment)
    trace = scale_load(_select(trace, options.vcs, options.limit), options.load_factor)
    trace = with_users(trace, users_per_vc=options.users_per_vc)
    first = options.cluster or DEFAULT_CLUSTER.get(options.trace or "")
    if first is None:
        raise SimError("--cluster is required for this trace (a cluster file, philly or itp)")
    specs = [first, *([options.compare_cluster] if options.compare_cluster else [])]
    clusters = dict(_cluster(spec) for spec in specs)
    if options.user_limit_share is not None:
        clusters = {
            label: limit_each_user(config, options.user_limit_share)
            for label, config in clusters.items()
        }
    if len(clusters) < len(specs):
        raise SimError("--cluster and --compare-cluster name the same cluster")
    with _progress(not options.as_json and err().is_terminal) as progress:
        evaluation = evaluate(trace, clusters, names, progress=progress)
    written = write_outputs(evaluation, options.out_dir, command=_command(options, specs))
    if options.as_json:
        sys.stdout.write(json.dumps(evaluation.summaries, indent=2) + "\n")
        return
    out().print(_summary_table(evaluation))
    out().print(
        f"\nReport, plots and JSON in {options.out_dir}: {', '.join(p.name for p in written)}"
    )
