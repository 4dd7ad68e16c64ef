"""Line charts as inline SVG, drawn on the server: no chart library, no build step, readable
without JavaScript, and every chart carries a text description for screen readers.

A chart has one line per series (a task, or a VC's use and guarantee) over a shared time axis,
the time span and the highest value written on its axes, and a legend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 10, 22
COLOURS = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777")


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[tuple[datetime, float]]
    dashed: bool = False


def line_chart(
    title: str, lines: Sequence[Line], *, unit: str, ceiling: float | None = None
) -> Markup:
    """An SVG chart of `lines`; `ceiling` fixes the top of the value axis (100 for percents)."""
    drawn = [line for line in lines if line.points]
    if not drawn:
        return Markup('<p class="empty">{}: nothing measured yet.</p>').format(title)
    times = [moment.timestamp() for line in drawn for moment, _ in line.points]
    start, end = min(times), max(times)
    top = ceiling or max((value for line in drawn for _, value in line.points), default=1.0) or 1.0
    span = end - start or 1.0
    inner_width, inner_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(moment: datetime) -> float:
        return LEFT + inner_width * (moment.timestamp() - start) / span

    def y(value: float) -> float:
        return TOP + inner_height * (1 - min(value, top) / top)

    parts = [
        f'<line class="axis" x1="{LEFT}" y1="{TOP + inner_height}" x2="{WIDTH - RIGHT}" '
        f'y2="{TOP + inner_height}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{_number(top)}</text>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + inner_height}" text-anchor="end">0</text>',
        f'<text class="tick" x="{LEFT}" y="{HEIGHT - 4}">'
        f"{_clock(min(m for line in drawn for m, _ in line.points))}</text>",
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - 4}" text-anchor="end">'
        f"{_clock(max(m for line in drawn for m, _ in line.points))}</text>",
    ]
    legend = []
    for index, line in enumerate(drawn):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x(moment):.1f},{y(value):.1f}" for moment, value in line.points)
        dash = ' stroke-dasharray="5 4"' if line.dashed else ""
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.8"{dash} points="{path}"/>'
        )
        last_moment, latest = line.points[-1]
        parts.append(
            f'<circle cx="{x(last_moment):.1f}" cy="{y(latest):.1f}" r="2.5" fill="{colour}"/>'
        )
        legend.append(
            f'<li><span class="swatch" style="background:{colour}"></span>'
            f"{escape(line.label)}: {_number(latest)} {escape(unit)} now</li>"
        )
    summary = "; ".join(
        f"{line.label}: now {_number(line.points[-1][1])}, peak "
        f"{_number(max(value for _, value in line.points))} {unit}"
        for line in drawn
    )
    return Markup(
        '<figure class="chart"><figcaption>{title} <span class="muted small">({unit})</span>'
        '</figcaption><svg viewBox="0 0 {w} {h}" role="img" aria-label="{label}">{body}</svg>'
        '<ul class="legend small">{legend}</ul></figure>'
    ).format(
        title=title,
        unit=unit,
        w=WIDTH,
        h=HEIGHT,
        label=f"{title}: {summary}",
        body=Markup("".join(parts)),
        legend=Markup("".join(legend)),
    )


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _clock(moment: datetime) -> str:
    return moment.strftime("%m-%d %H:%M:%S") + " UTC"
