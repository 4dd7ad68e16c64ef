"""PAI under a storm of faults: nothing lost, nothing run twice, nothing left behind.

A Ray cluster of a head and three worker hosts in network namespaces, a PostgreSQL of its own,
two controllers (one stands by) and two API workers; three users submit jobs of known outcome
(through the SDK and `pai`) while a seeded schedule of faults kills controllers, API workers,
agents and whole hosts, cuts links and stops the store. Then the checker proves from the run's
history that every accepted job ended once as its kind must, that no two runs of a task
overlapped, that no answer was a server error, that reads were quick while the store was there,
that nothing is left on the hosts, and that the store agrees with what the hosts ran
(`pai.chaos`; needs root). Exits 1 when anything was violated.

    python benchmarks/chaos.py [--minutes 3] [--seed 1] [--json] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # the run imports Ray's sandbox: not needed for --help
    from pai.chaos.run import ChaosReport


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="how long the storm lasts")
    parser.add_argument("--seed", type=int, default=1, help="the seed of the faults and the jobs")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run's history and its services' output"
    )
    options = parser.parse_args()

    from pai.chaos.run import run_chaos

    # Short: Ray's socket paths live under it and must stay within the kernel's 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="pai-chaos-", dir="/tmp"))
    try:
        report = run_chaos(options.minutes, options.seed, root)
    finally:
        if options.keep:  # also when the run failed: what happened is in there
            kept = Path(tempfile.mkdtemp(prefix="pai-chaos-kept-"))
            for part in ("history.jsonl", "logs", "home/controller.log", "home/pai.log"):
                if (root / part).is_dir():
                    shutil.copytree(root / part, kept / part)
                elif (root / part).exists():
                    shutil.copy(root / part, kept)
            print(f"kept in {kept}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    if options.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        show(report)
    sys.exit(1 if report.violations else 0)


def show(report: ChaosReport) -> None:
    console = Console()
    faults = Table(title=f"Faults ({report.minutes:g} min, seed {report.seed})")
    for column in ("fault", "count", "recovery mean s", "max s", "runs killed", "work lost s"):
        faults.add_column(column, justify="left" if column == "fault" else "right")
    for cost in report.faults:
        faults.add_row(
            cost.fault, str(cost.count), f"{cost.mean_recovery:.1f}", f"{cost.max_recovery:.1f}",
            str(cost.runs_killed), f"{cost.work_lost:.1f}",
        )  # fmt: skip
    console.print(faults)
    jobs = Table(title="Jobs by kind and how they ended")
    jobs.add_column("kind")
    jobs.add_column("ended")
    for kind, states in sorted(report.jobs.items()):
        jobs.add_row(kind, ", ".join(f"{state} {count}" for state, count in sorted(states.items())))
    console.print(jobs)
    console.print(f"{report.ssh_sessions} SSH logins to interactive jobs")
    for problem in report.problems:
        console.print(f"[yellow]run problem:[/yellow] {problem}")
    for violation in report.violations:
        console.print(f"[red]violation[/red] {violation}")
    verdict = "[green]no violations[/green]" if not report.violations else "[red]violations[/red]"
    console.print(f"{len(report.violations)} violations: {verdict} in {report.seconds:.0f} s")


if __name__ == "__main__":
    main()
