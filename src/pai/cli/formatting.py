"""How values look in tables and trees: times, durations, states, usage bars."""

from __future__ import annotations

import time
from datetime import datetime

from rich.console import RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

STATE_STYLES = {
    "WAITING": "yellow",
    "RUNNING": "cyan",
    "STOPPING": "magenta",
    "SUCCEEDED": "green",
    "STOPPED": "magenta",
    "FAILED": "bold red",
    "UNKNOWN": "dim",
}
NONE = "-"


def state(value: str | None) -> Text:
    """A job or task state, coloured by what it means."""
    text = value or "UNKNOWN"
    return Text(text, style=STATE_STYLES.get(text, ""))


def timestamp(milliseconds: int | None) -> str:
    """Local time of a millisecond epoch timestamp, or `-`."""
    if milliseconds is None:
        return NONE
    return datetime.fromtimestamp(milliseconds / 1000).strftime("%Y-%m-%d %H:%M:%S")


def duration(start_ms: int | None, end_ms: int | None) -> str:
    """`1h 02m`, `3m 12s`, `4s` between two timestamps (until now if not ended), or `-`."""
    if start_ms is None:
        return NONE
    end = end_ms if end_ms is not None else time.time() * 1000
    seconds = max(0, int((end - start_ms) / 1000))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


def usage_bar(used: float, total: float, width: int = 20) -> RenderableType:
    """`█████░░░ 5/8`: how much of `total` is used; `-` when there is nothing to use."""
    if total <= 0:
        return Text(NONE, style="dim")
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        ProgressBar(total=total, completed=min(used, total), width=width),
        Text(f"{used:g}/{total:g}"),
    )
    return grid


def table(*columns: str) -> Table:
    """A results table in the house style."""
    result = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        result.add_column(column, overflow="fold")
    return result


def yes_no(value: bool) -> Text:
    return Text("yes", "bold") if value else Text("no", "dim")
