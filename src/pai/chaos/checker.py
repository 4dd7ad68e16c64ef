"""What a chaos run must show, checked from its history alone.

Each check is a pure function of the records and returns the violations it finds, each with
an explanation a person can act on. `check` runs them all. The promises:

- every accepted job ended once, in the state its kind must end in, and a refused one left
  nothing behind (`check_outcomes`);
- no two runs of one task overlapped in time, and no task ran again in a job attempt after it
  had succeeded there (`check_runs`; a killed run is seen until its last beat, so an overlap
  shorter than a beat, 0.25 s, can pass unseen);
- no answer was a server error: only 503 or 507, with `Retry-After`, and only while the store
  was away (`check_answers`);
- reads were answered within `READ_LIMIT` seconds except while the store was away
  (`check_read_times`);
- nothing a task made is left on a host once its job has ended (`check_remnants`);
- the store's task states agree with what the hosts ran (`check_store_against_hosts`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pai.chaos.history import Call, Fault, FinalJob, Record, Remnant, Run, Submission
from pai.runtime.exitspec import builtin_exit_spec

READ_LIMIT = 1.0
"""Seconds within which a read must be answered while the store is there."""
STORE_FAULTS = frozenset({"store-stop"})
"""Faults that take the store away: reads may wait and writes be refused meanwhile."""
STORE_SETTLE = 3.0
"""Seconds after the store is back during which the servers' connections are still renewed."""
UNAVAILABLE = frozenset({503, 507})
ENDED = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str
    explanation: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.subject}: {self.explanation}"


def reported_exit_code(status: int) -> int:
    """The code PAI reports for a task whose process exited with `status`: its exit spec's
    (OpenPAI's runtime reports a code the spec does not name as 255)."""
    return builtin_exit_spec().classify(status).code


def check(records: Sequence[Record]) -> list[Violation]:
    """Every violation of the run's promises in `records`."""
    checks: list[Callable[[Sequence[Record]], list[Violation]]] = [
        check_outcomes,
        check_runs,
        check_answers,
        check_read_times,
        check_remnants,
        check_store_against_hosts,
    ]
    return [violation for one in checks for violation in one(records)]


def _of(records: Iterable[Record], kind: type[R]) -> list[R]:
    return [record for record in records if isinstance(record, kind)]


def check_outcomes(records: Sequence[Record]) -> list[Violation]:
    finals: dict[str, list[FinalJob]] = defaultdict(list)
    for final in _of(records, FinalJob):
        finals[final.job].append(final)
    found = []
    submitted = set()
    for submission in _of(records, Submission):
        submitted.add(submission.job)
        shown = finals.get(submission.job, [])
        if submission.accepted is False:
            if shown:
                found.append(
                    Violation(
                        "refused-but-kept",
                        submission.job,
                        f"the submission was refused ({submission.detail}), yet the store has "
                        f"the job ({shown[0].state})",
                    )
                )
            continue
        if not shown:
            if submission.accepted:
                found.append(
                    Violation(
                        "lost", submission.job, "accepted, but the store does not have the job"
                    )
                )
            continue
        if len(shown) > 1:
            found.append(
                Violation("recorded-twice", submission.job, f"the store has it {len(shown)} times")
            )
        final = shown[0]
        if final.state not in ENDED:
            found.append(
                Violation("not-ended", submission.job, f"still {final.state} after the run")
            )
        elif final.state != submission.expected_state:
            found.append(
                Violation(
                    "wrong-end",
                    submission.job,
                    f"a {submission.workload} job must end {submission.expected_state}, "
                    f"it ended {final.state} (exit code {final.exit_code})",
                )
            )
        elif (
            submission.expected_exit_code is not None
            and final.exit_code != submission.expected_exit_code
        ):
            found.append(
                Violation(
                    "wrong-exit-code",
                    submission.job,
                    f"must end with exit code {submission.expected_exit_code}, "
                    f"ended with {final.exit_code}",
                )
            )
    for job in sorted(set(finals) - submitted):
        found.append(Violation("unsubmitted", job, "the store has a job nobody submitted"))
    return found


def _runs_by_task(records: Sequence[Record]) -> dict[tuple[str, str, int], list[Run]]:
    by_task: dict[tuple[str, str, int], list[Run]] = defaultdict(list)
    for run in _of(records, Run):
        by_task[(run.job, run.role, run.index)].append(run)
    for runs in by_task.values():
        runs.sort(key=lambda run: run.start)
    return by_task


def _task_name(task: tuple[str, str, int]) -> str:
    return f"{task[0]} {task[1]}-{task[2]}"


def _describe(run: Run) -> str:
    return f"attempt {run.job_attempt}.{run.task_attempt} on {run.host}"


def _faults_during(faults: Sequence[Fault], first: Run, then: Run) -> str:
    """The faults between `first`'s start and the later end of the two, timed from that
    start: where to look for what let `then` run beside `first`."""
    end = max(first.end, then.end)
    during = [f for f in faults if f.start <= end and f.end >= first.start]
    if not during:
        return "; no fault meanwhile"
    named = ", ".join(
        f"{f.fault} of {f.target} from +{f.start - first.start:.1f} s to "
        f"+{f.end - first.start:.1f} s"
        for f in sorted(during, key=lambda f: f.start)
    )
    return f"; faults from the start of {_describe(first)} on: {named}"


def check_runs(records: Sequence[Record]) -> list[Violation]:
    faults = _of(records, Fault)
    found = []
    for task, runs in sorted(_runs_by_task(records).items()):
        latest: Run | None = None  # of the runs so far, the one that ended last
        for run in runs:
            if latest is not None and run.start < latest.end:
                found.append(
                    Violation(
                        "overlap",
                        _task_name(task),
                        f"{_describe(run)} started {latest.end - run.start:.2f} s before "
                        f"{_describe(latest)} had ended" + _faults_during(faults, latest, run),
                    )
                )
            if latest is None or run.end > latest.end:
                latest = run
        for done in runs:
            again = [
                run
                for run in runs
                if done.exit_code == 0
                and run.job_attempt == done.job_attempt
                and run.start >= done.end
            ]
            if again:
                found.append(
                    Violation(
                        "ran-after-success",
                        _task_name(task),
                        f"{_describe(again[0])} ran after {_describe(done)} had succeeded",
                    )
                )
    return found


def check_answers(records: Sequence[Record]) -> list[Violation]:
    away = store_away(records)
    found = []
    for call in _of(records, Call):
        if call.status is None or call.status < 500:
            continue
        subject = f"{call.client} {call.method} {call.path}"
        if call.status not in UNAVAILABLE:
            found.append(Violation("server-error", subject, f"answered {call.status}"))
        elif not call.retry_after:
            found.append(
                Violation("no-retry-after", subject, f"answered {call.status} without Retry-After")
            )
        elif not _during(call, away):
            found.append(
                Violation(
                    "unavailable-with-store",
                    subject,
                    f"answered {call.status} at {call.start:.1f} while the store was there",
                )
            )
    return found


def _during(call: Call, windows: list[tuple[float, float]]) -> bool:
    return any(call.start < until and call.end > since for since, until in windows)


def store_away(records: Sequence[Record]) -> list[tuple[float, float]]:
    """When the store was away, with the time its clients take to reconnect."""
    return [
        (fault.start, fault.end + STORE_SETTLE)
        for fault in _of(records, Fault)
        if fault.fault in STORE_FAULTS
    ]


def check_read_times(records: Sequence[Record], limit: float = READ_LIMIT) -> list[Violation]:
    away = store_away(records)
    found = []
    for call in _of(records, Call):
        if call.method != "GET" or call.status is None or call.end - call.start <= limit:
            continue
        if _during(call, away):
            continue
        found.append(
            Violation(
                "slow-read",
                f"{call.client} GET {call.path}",
                f"answered in {call.end - call.start:.2f} s (limit {limit:g} s) "
                "while the store was there",
            )
        )
    return found


def check_remnants(records: Sequence[Record]) -> list[Violation]:
    running = {final.job for final in _of(records, FinalJob) if final.state not in ENDED}
    return [
        Violation(
            "left-behind",
            f"{remnant.host} {remnant.what}",
            f"{remnant.detail} (job {remnant.job or 'unknown to the store'})",
        )
        for remnant in _of(records, Remnant)
        if remnant.job is None or remnant.job not in running
    ]


def check_store_against_hosts(records: Sequence[Record]) -> list[Violation]:
    by_task = _runs_by_task(records)
    found = []
    for final in _of(records, FinalJob):
        for task in final.tasks:
            if task.state not in ("SUCCEEDED", "FAILED"):
                continue
            key = (final.job, task.role, task.index)
            runs = by_task.get(key, [])
            # A code of PAI's own (negative) may end a task that never started: its start
            # failed on a full disk, say. Any other end needs a run.
            if not runs and task.exit_code is not None and task.exit_code < 0:
                continue
            if not runs:
                found.append(
                    Violation(
                        "ran-nowhere",
                        _task_name(key),
                        f"the store says {task.state}, but no host ran the task",
                    )
                )
                continue
            last = max(runs, key=lambda run: run.end)
            # A negative code is PAI's own (the task was stopped or lost): the run that the
            # host saw was killed and said nothing, so only the task's own codes compare.
            expected = 0 if task.state == "SUCCEEDED" else task.exit_code
            problems = []
            if task.host is not None and last.host != task.host:
                problems.append(f"the store says host {task.host}, the last run was on {last.host}")
            host_said = None if last.exit_code is None else reported_exit_code(last.exit_code)
            if expected is not None and expected >= 0 and host_said != expected:
                problems.append(
                    f"the store says {task.state} (exit code {task.exit_code}), the last run "
                    f"({_describe(last)}) exited with {last.exit_code} (reported as {host_said})"
                )
            found.extend(Violation("store-disagrees", _task_name(key), p) for p in problems)
    return found
