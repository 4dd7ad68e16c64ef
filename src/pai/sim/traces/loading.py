"""One entry point for every trace: a shipped trace by name, or a file whose format is detected."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args

from pai.sim.traces import helios, itp, pai_csv, philly_joblog, philly_vc
from pai.sim.traces.errors import TraceFormatError
from pai.sim.traces.model import Trace
from pai.sim.traces.reading import open_text, read_csv_header

TraceKind = Literal["philly-vc", "itp", "philly-joblog", "helios", "pai-csv"]
TRACE_KINDS: tuple[TraceKind, ...] = get_args(TraceKind)

SHIPPED_TRACES: tuple[TraceKind, ...] = ("philly-vc", "itp")
"""Kinds that load the project's shipped file when no path is given."""

_LOADERS: dict[TraceKind, Callable[..., Trace]] = {
    "philly-vc": philly_vc.load_philly_vc,
    "itp": itp.load_itp,
    "philly-joblog": philly_joblog.load_philly_joblog,
    "helios": helios.load_helios,
    "pai-csv": pai_csv.read_trace_csv,
}

_CSV_SIGNATURES: dict[TraceKind, tuple[str, ...]] = {
    "philly-vc": philly_vc.COLUMNS,
    "itp": itp.COLUMNS,
    "helios": helios.COLUMNS,
    "pai-csv": pai_csv.COLUMNS,
}


def detect_kind(path: Path) -> TraceKind:
    """The format of a trace file: a JSON list is a Philly job log; a CSV is recognised by the
    columns its header must have. Anything else, or a header that fits several formats, is an
    error that asks for an explicit kind."""
    with open_text(path) as stream:
        start = stream.read(4096).lstrip()
    if start.startswith("["):
        return "philly-joblog"
    header = set(read_csv_header(path))
    matches = [kind for kind, columns in _CSV_SIGNATURES.items() if header.issuperset(columns)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        found = " or ".join(matches)
        raise TraceFormatError(path, 1, f"the header fits several formats ({found}); pass kind=")
    raise TraceFormatError(
        path, 1, f"not a known trace format; known formats: {', '.join(TRACE_KINDS)}"
    )


def load_trace(
    source: str | os.PathLike[str], *, kind: TraceKind | None = None, **options: Any
) -> Trace:
    """Load a trace: ``"philly-vc"`` or ``"itp"`` alone name the shipped files; anything else is
    a path, read as `kind` or as the format detected from its content.

    `options` go to the loader (e.g. ``alignment="end"`` for philly-vc, ``single_vc="all"`` for
    itp, ``include_cpu_jobs=True`` for helios).
    """
    shipped = next((name for name in SHIPPED_TRACES if name == source), None)
    path = Path(source)
    if shipped is not None and not path.exists():
        return _LOADERS[shipped](**options)
    if kind is not None and kind not in _LOADERS:
        raise ValueError(f"unknown trace kind {kind!r}; known kinds: {', '.join(TRACE_KINDS)}")
    return _LOADERS[kind or detect_kind(path)](path, **options)
