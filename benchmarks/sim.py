"""Trace replay speed: the first 100,000 jobs of the Philly trace on the 2,490-GPU Philly cluster,
through PAI's default `pai` scheduling policy (HiveD with overflow, checkpoint resume and
reservations), its job state machine and the simulated executor.

    python benchmarks/sim.py            # Rich table
    python benchmarks/sim.py --json     # {"jobs", "gpus", "wall_seconds", "events_per_second", ...}
    python benchmarks/sim.py --policy pai+fair+limits   # what sharing VCs between users costs

With `+fair` or `+limits` the trace's jobs are dealt to users first (`pai.sim.users`) and every
VC limits each user to half of its GPUs.

`wall_seconds` times the replay alone; loading the trace and building the cluster are reported
apart (`setup_seconds`). Events are job arrivals and task starts and ends.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from pai.cluster import load_cluster
from pai.sim.clusters import philly_cluster
from pai.sim.engine import replay
from pai.sim.policies import POLICIES, SHARING, make_policy
from pai.sim.traces import Trace, load_trace
from pai.sim.users import with_users
from pai.sim.usersharing import limit_each_user

JOBS = 100_000
POLICY = "pai"
USER_LIMIT_SHARE = 0.5


def run(jobs: int, policy_name: str) -> dict[str, float | int | str]:
    started = time.perf_counter()
    full = load_trace("philly-vc")
    cluster = load_cluster(philly_cluster(full))
    trace = Trace(full.name, full.jobs[:jobs], full.metadata)
    if "+" in policy_name:
        trace = with_users(trace)
        cluster = limit_each_user(cluster, USER_LIMIT_SHARE)
    policy = make_policy(policy_name, cluster)
    setup = time.perf_counter() - started
    result = replay(trace, policy)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "policy": policy_name,
        "jobs": len(trace),
        "gpus": result.gpus,
        "wall_seconds": round(result.wall_seconds, 2),
        "events_per_second": round(result.events / result.wall_seconds),
        "jobs_per_second": round(len(trace) / result.wall_seconds),
        "decisions": result.decisions,
        "events": result.events,
        "setup_seconds": round(setup, 2),
        "peak_mb": round(peak_kb / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--jobs", type=int, default=JOBS, help="replay the first N jobs")
    parser.add_argument(
        "--policy",
        default=POLICY,
        help=f"one of {', '.join(POLICIES)}, optionally with "
        f"{' and '.join('+' + part for part in SHARING)}",
    )
    args = parser.parse_args()
    result = run(args.jobs, args.policy)
    if args.json:
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Replay of the Philly trace, {args.policy} policy")
    for key in result:
        table.add_column(key.replace("_", " "), justify="right")
    table.add_row(*(str(value) for value in result.values()))
    Console().print(table)


if __name__ == "__main__":
    main()
