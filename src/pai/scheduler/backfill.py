"""Reservations for starving groups, with Slurm-style (EASY) backfill inside a VC.

Without a reservation a stream of small jobs can keep a large one waiting forever: HiveD places
whatever fits, and the large job never finds its VC empty enough. Once a guaranteed group has
waited longer than a bound, it gets a *reservation* in its VC (one per VC and chain, the first
group to starve): an estimated start, the moment enough of the VC's cells will be free judged by
the expected ends of the groups running there. Another group of that VC may then start only if
it does not push that moment back: it ends before the estimated start (by its declared or learned
run time), or it fits in the cells the reservation will not need even then (the *spare*).

Estimates count cells, not shapes: a reservation is a promise about how many of the VC's cells
are free at its start, which topology may still delay. Pure bookkeeping: the caller gives the
time and the VC's free cells; nothing here knows the cells themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MIN_RUN_S = 1.0
"""Shorter runs are gang roll-backs (a group placed, then released since another of its job's
groups had to wait), not runs: they neither end a wait nor teach a run time."""

ViewKey = tuple[str, str]
"""(VC, chain): the cells a reservation is made in."""


@dataclass(frozen=True)
class Reservation:
    """`group` is expected to start at `start_s`, once `after` (a running group) has ended;
    `after` is None when it waits only for its VC's free cells to take the shape it needs."""

    group: str
    view: ViewKey
    leaves: int
    since_s: float
    start_s: float
    after: str | None


@dataclass(frozen=True)
class _Running:
    view: ViewKey
    leaves: int
    started_s: float
    end_s: float | None  # expected; None when neither declared nor learned yet
    waiting_since_s: float | None


class ReservationBook:
    """Who waits since when, who runs until when, and the reservation of each VC and chain."""

    def __init__(self, starvation_after_s: float) -> None:
        if starvation_after_s < 0:
            raise ValueError(f"starvation bound must be >= 0 seconds, got {starvation_after_s}")
        self.starvation_after_s = starvation_after_s
        self._waiting_since: dict[str, float] = {}
        self._running: dict[str, _Running] = {}
        self._by_view: dict[ViewKey, set[str]] = {}
        self._learned: dict[str, tuple[float, int]] = {}  # VC -> (sum of run times, count)
        self.reservations: dict[ViewKey, Reservation] = {}

    # -- what happens to groups --------------------------------------------------------------------

    def waits(self, group: str, now: float) -> float:
        """The group was told to wait: how long it has waited since it first was."""
        return now - self._waiting_since.setdefault(group, now)

    def started(
        self, group: str, view: ViewKey | None, leaves: int, run_s: float | None, now: float
    ) -> None:
        """The group got cells (`view` None: not guaranteed cells of a VC, nothing to count)."""
        since = self._waiting_since.get(group)
        self.forget(group)
        if view is None:
            view = ("", "")  # not counted in any VC's cells: only remembered
        elif run_s is None:
            run_s = self.learned_run_s(view[0])
        end = None if run_s is None else now + run_s
        self._running[group] = _Running(view, leaves, now, end, since)
        self._by_view.setdefault(view, set()).add(group)

    def ended(self, group: str, now: float) -> None:
        """The group released its cells (or gave up waiting); how long it ran teaches its VC's
        typical run time."""
        self.forget(group)
        running = self._running.pop(group, None)
        if running is None:
            return
        self._by_view[running.view].discard(group)
        ran = now - running.started_s
        if ran < MIN_RUN_S:
            if running.waiting_since_s is not None:
                self._waiting_since[group] = running.waiting_since_s
            return
        vc = running.view[0]
        if vc:
            total, count = self._learned.get(vc, (0.0, 0))
            self._learned[vc] = (total + ran, count + 1)

    def forget(self, group: str) -> None:
        """The group left the queue without running (e.g. it was stopped)."""
        self._waiting_since.pop(group, None)
        for key, reservation in list(self.reservations.items()):
            if reservation.group == group:
                del self.reservations[key]

    def started_s(self, group: str) -> float | None:
        """When a running group got its cells, None if it is not running."""
        running = self._running.get(group)
        return None if running is None else running.started_s

    def learned_run_s(self, vc: str) -> float | None:
        """The mean run time of the VC's completed groups, None before the first."""
        total, count = self._learned.get(vc, (0.0, 0))
        return total / count if count else None

    # -- reservations ------------------------------------------------------------------------------

    def reserve_if_starving(
        self, group: str, view: ViewKey, leaves: int, free: int, now: float
    ) -> Reservation | None:
        """The group's reservation, made now if it has waited past the bound and its VC and chain
        has none; refreshed to the current estimate. None if it has none."""
        reservation = self.reservations.get(view)
        if reservation is not None and reservation.group != group:
            return None
        since = self._waiting_since.get(group, now)
        if reservation is None and now - since < self.starvation_after_s:
            return None
        start, after = self.estimate(view, leaves, free, now)
        fresh = Reservation(group, view, leaves, since, start, after)
        self.reservations[view] = fresh
        return fresh

    def blocking(
        self, group: str, view: ViewKey, leaves: int, run_s: float | None, free: int, now: float
    ) -> Reservation | None:
        """The reservation that `group` (`leaves` cells for `run_s`) would push back, or None
        when it may start: no reservation, its own, it ends in time, or it fits in the spare."""
        reservation = self.reservations.get(view)
        if reservation is None or reservation.group == group:
            return None
        if run_s is None:
            run_s = self.learned_run_s(view[0])
        start, after = self.estimate(view, reservation.leaves, free, now)
        current = Reservation(
            reservation.group, view, reservation.leaves, reservation.since_s, start, after
        )
        self.reservations[view] = current
        if run_s is not None and now + run_s <= start:
            return None
        if self.spare(view, reservation.leaves, free, start, now) >= leaves:
            return None
        return current

    def estimate(
        self, view: ViewKey, leaves: int, free: int, now: float
    ) -> tuple[float, str | None]:
        """When `leaves` cells of the view are expected free, and after which group's end.

        With enough free cells already (only their shape is missing) it is the next end; with
        no expected end at all it is unknown (infinity)."""
        ends = sorted(self._expected_ends(view, now))
        available = free
        for end, leaves_freed, name in ends:
            available += leaves_freed
            if available >= leaves or free >= leaves:
                return end, name
        return (now, None) if free >= leaves and not ends else (float("inf"), None)

    def spare(self, view: ViewKey, leaves: int, free: int, start: float, now: float) -> int:
        """Cells of the view free at `start` beyond the `leaves` reserved for then."""
        freed = sum(n for end, n, _ in self._expected_ends(view, now) if end <= start)
        return free + freed - leaves

    def _expected_ends(self, view: ViewKey, now: float) -> Iterable[tuple[float, int, str]]:
        for name in self._by_view.get(view, ()):
            running = self._running[name]
            if running.end_s is not None:
                yield max(running.end_s, now), running.leaves, name


def describe_start(reservation: Reservation, now: float) -> str:
    """'estimated start: in about 40 min, after job X ends' (or why there is no estimate)."""
    if reservation.start_s == float("inf"):
        return "estimated start: unknown (no run time of the jobs ahead is known yet)"
    wait = max(reservation.start_s - now, 0.0)
    when = _duration(wait)
    if reservation.after is None:
        return f"estimated start: {when}, once its VC's free cells take the shape it needs"
    return f"estimated start: {when}, after job {job_of(reservation.after)} ends"


def job_of(group: str) -> str:
    """The job a group belongs to: groups are named `<job key>/<group>` (a replay's are bare)."""
    return group.split("/", 1)[0]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return "in less than a minute"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"in about {minutes} min"
    hours = seconds / 3600
    return f"in about {hours:.0f} h" if hours < 48 else f"in about {hours / 24:.0f} days"
