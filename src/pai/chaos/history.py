"""What happened during a chaos run, as records appended to a JSON-lines file.

Every record is one of the dataclasses below, written as a JSON object with its `kind`. Clocks
are this machine's `time.time()`: the clients, the fault injectors and the tasks (which run on
the same machine, in other network namespaces) all read the same clock, so their times compare.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class Call:
    """One HTTP exchange of a client with an API worker. `status` None: no answer came."""

    kind: ClassVar[str] = "call"
    client: str
    method: str
    path: str
    start: float
    end: float
    status: int | None
    retry_after: str | None = None


@dataclass(frozen=True)
class Submission:
    """A job the workload submitted, the state its kind must end in, and what the client was
    told: `accepted` True (answered as accepted), False (refused: it must not exist), None (no
    answer ever came: it may exist)."""

    kind: ClassVar[str] = "submission"
    job: str
    workload: str
    expected_state: str
    expected_exit_code: int | None
    via: str
    start: float
    end: float
    accepted: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Fault:
    """A fault, from its injection to its undo (the thing restarted, the link up again)."""

    kind: ClassVar[str] = "fault"
    fault: str
    target: str
    start: float
    end: float
    note: str = ""


@dataclass(frozen=True)
class Run:
    """One run of a task as the task itself recorded it: from its first to its last beat;
    `exit_code` None when it died without saying (killed)."""

    kind: ClassVar[str] = "run"
    job: str
    role: str
    index: int
    host: str
    job_attempt: int
    task_attempt: int
    start: float
    end: float
    exit_code: int | None


@dataclass(frozen=True)
class FinalTask:
    role: str
    index: int
    state: str
    host: str | None
    exit_code: int | None


@dataclass(frozen=True)
class FinalJob:
    """A job as the store shows it after the run."""

    kind: ClassVar[str] = "final"
    job: str
    state: str
    exit_code: int | None
    retries: int
    tasks: tuple[FinalTask, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Remnant:
    """Something found on a host after the run: a task process, a listening task port or a
    task directory; `job` the job it belongs to, when known."""

    kind: ClassVar[str] = "remnant"
    host: str
    what: str
    job: str | None
    detail: str


Record = Call | Submission | Fault | Run | FinalJob | Remnant
KINDS: dict[str, type[Record]] = {
    kind.kind: kind for kind in (Call, Submission, Fault, Run, FinalJob, Remnant)
}


class HistoryError(ValueError):
    """A history file that cannot be read back (names the line)."""


def to_json(record: Record) -> str:
    return json.dumps({"kind": record.kind, **asdict(record)}, sort_keys=True)


def from_json(text: str) -> Record:
    data: dict[str, Any] = json.loads(text)
    kind = KINDS[data.pop("kind")]
    if kind is FinalJob:
        data["tasks"] = tuple(FinalTask(**task) for task in data["tasks"])
    names = {item.name for item in fields(kind)}
    return kind(**{key: value for key, value in data.items() if key in names})


class History:
    """An append-only history file, shared by the run's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def add(self, record: Record) -> None:
        line = to_json(record) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line)

    def records(self) -> list[Record]:
        return read_history(self.path)


def read_history(path: Path) -> list[Record]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(from_json(line))
        except (ValueError, KeyError, TypeError) as problem:
            raise HistoryError(f"{path}:{number}: not a history record ({problem})") from None
    return records
