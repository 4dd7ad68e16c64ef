"""What each user holds in each VC now, and the GPU time they used recently.

Both serve sharing a VC between its users. *Limits* (`pai.scheduler.userlimits`) look at what a
user's guaranteed groups hold now. *Fair share* orders waiting jobs of the same priority by
their users' recent use: GPU-seconds, each weighted by 2^(-age / half-life) (Slurm's decayed
usage), so that a user who ran a sweep yesterday goes behind a colleague who ran nothing, and
is forgiven over a few half-lives.

Recent use is kept as a value, the time it was last brought up to date and the GPUs held since
(the rate): the decayed integral then has a closed form, and updating it costs the same for a
user holding one GPU or a thousand. Every GPU a user's jobs hold in the VC counts, guaranteed
or opportunistic: fair share is about the GPU time users got. Groups on cells without GPUs
(CPU SKUs) count their CPUs instead, so that fair share works on CPU clusters too.

Fair share must not undo the starvation bound of the `pai` policy: the first job of a VC to
wait longer than the bound gets a reservation, and a stream of light users' jobs must not keep
a heavy user's large job from ever being that first. So among waiting jobs of one VC and
priority, the first submitted of those that waited past the bound goes first (`first_starving`),
exactly the job first come, first served would have offered first; the others go by recent use.

Pure: the caller gives the time of each change and the groups (any name unique among groups
held at once), their job, VC and user.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from pai.scheduler.userlimits import Use

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0
"""Slurm's default PriorityDecayHalfLife: a week."""

UserKey = tuple[str, str]
"""(VC, user)."""

JobId = TypeVar("JobId", bound=Hashable)


def first_starving(
    waiting: Iterable[tuple[JobId, str, int, float, int]], now: float, starving_after_s: float
) -> set[JobId]:
    """Of waiting jobs given as (id, VC, priority, submitted at, tie-break), those that fair
    share puts first: per VC and priority, the first submitted of the jobs that waited past
    the bound (see the module docstring)."""
    first: dict[tuple[str, int], tuple[float, int, JobId]] = {}
    for job, vc, priority, submitted, tie in waiting:
        if now - submitted < starving_after_s:
            continue
        known = first.get((vc, priority))
        if known is None or (submitted, tie) < known[:2]:
            first[(vc, priority)] = (submitted, tie, job)
    return {job for _, _, job in first.values()}


@dataclass(frozen=True)
class _Holding:
    job: str
    key: UserKey
    use: Use  # GPUs and CPUs of the group; no job counted
    guaranteed: bool


def decayed_forward(value: float, gpus: float, elapsed_s: float, half_life_s: float) -> float:
    """Recent use `elapsed_s` after it was `value`, holding `gpus` meanwhile."""
    return _forward(value, gpus, elapsed_s, math.log(2) / half_life_s)


def _forward(value: float, rate: float, elapsed_s: float, decay: float) -> float:
    kept = math.exp(-decay * max(elapsed_s, 0.0))
    return value * kept + rate * (1.0 - kept) / decay


def _rate(use: Use) -> float:
    """What a group adds to its user's recent use per second: GPUs, or CPUs without GPUs."""
    return use.gpus if use.gpus > 0 else use.cpus


class _Decayed:
    """Decayed GPU-seconds: `value` at time `at`, accruing `rate` GPUs from then on."""

    __slots__ = ("at", "rate", "value")

    def __init__(self, at: float) -> None:
        self.value = 0.0
        self.at = at
        self.rate = 0.0

    def at_time(self, now: float, decay: float) -> float:
        """The value at `now` (`decay`: ln 2 / half-life)."""
        return _forward(self.value, self.rate, now - self.at, decay)

    def change_rate(self, delta: float, now: float, decay: float) -> None:
        self.value = self.at_time(now, decay)
        self.at = max(now, self.at)
        self.rate = max(self.rate + delta, 0.0)


class UsageLedger:
    """Groups held per user and VC, and the users' decayed GPU time."""

    def __init__(self, half_life_s: float = DEFAULT_HALF_LIFE_S) -> None:
        if not 0 < half_life_s < math.inf:
            raise ValueError(f"the half-life must be > 0 seconds, got {half_life_s}")
        self.half_life_s = half_life_s
        self._decay = math.log(2) / half_life_s
        self._groups: dict[str, _Holding] = {}
        self._held: dict[UserKey, Use] = {}  # guaranteed GPUs and CPUs, no jobs counted
        self._jobs: dict[UserKey, Counter[str]] = {}  # job -> its guaranteed groups held
        self._recent: dict[UserKey, _Decayed] = {}

    # -- changes -----------------------------------------------------------------------------------

    def hold(
        self,
        group: str,
        *,
        job: str,
        vc: str,
        user: str,
        use: Use,
        guaranteed: bool,
        now: float,
    ) -> None:
        """`group` (of `job`, of `user`, in `vc`) got cells holding `use`, from `now` on."""
        if group in self._groups:
            self.release(group, now)
        holding = _Holding(job, (vc, user), Use(use.gpus, use.cpus), guaranteed)
        self._groups[group] = holding
        self._recent_of(holding.key, now).change_rate(_rate(use), now, self._decay)
        if guaranteed:
            self._count(holding, +1)

    def release(self, group: str, now: float) -> None:
        """`group` gave its cells back at `now` (unknown groups are ignored)."""
        holding = self._groups.pop(group, None)
        if holding is None:
            return
        self._recent_of(holding.key, now).change_rate(-_rate(holding.use), now, self._decay)
        if holding.guaranteed:
            self._count(holding, -1)

    def set_guaranteed(self, group: str, guaranteed: bool) -> None:
        """A held group now counts as guaranteed, or no longer does (lazily preempted)."""
        holding = self._groups.get(group)
        if holding is None or holding.guaranteed == guaranteed:
            return
        self._count(holding, +1 if guaranteed else -1)
        self._groups[group] = _Holding(holding.job, holding.key, holding.use, guaranteed)

    def add_past_use(
        self, vc: str, user: str, gpus: float, start: float, end: float, now: float
    ) -> None:
        """GPU time used before this ledger existed (`gpus` from `start` to `end`), as after a
        restart: it counts as if it had been recorded then."""
        if end <= start or gpus <= 0:
            return
        decayed = self._recent_of((vc, user), now)
        decayed.change_rate(0.0, now, self._decay)  # brought up to `now`
        ages = (max(now - end, 0.0), max(now - start, 0.0))
        weight = (math.exp(-self._decay * ages[0]) - math.exp(-self._decay * ages[1])) / self._decay
        decayed.value += gpus * weight

    # -- questions ---------------------------------------------------------------------------------

    def holds(self, group: str) -> bool:
        return group in self._groups

    def guaranteed(self, group: str) -> bool | None:
        """Whether a held group counts as guaranteed; None if it is not held."""
        holding = self._groups.get(group)
        return None if holding is None else holding.guaranteed

    def held(self, vc: str, user: str) -> Use:
        """What the user's guaranteed groups hold in the VC, and their jobs."""
        key = (vc, user)
        use = self._held.get(key, Use())
        return Use(use.gpus, use.cpus, len(self._jobs.get(key, ())))

    def recent_gpu_seconds(self, vc: str, user: str, now: float) -> float:
        """The user's GPU-seconds in the VC, each weighted by 2^(-age / half-life) (CPU-seconds
        of groups on cells without GPUs)."""
        decayed = self._recent.get((vc, user))
        return 0.0 if decayed is None else decayed.at_time(now, self._decay)

    def gpus_held(self, vc: str, user: str) -> float:
        """All GPUs the user's groups hold in the VC now, opportunistic ones included (CPUs
        of groups on cells without GPUs)."""
        decayed = self._recent.get((vc, user))
        return 0.0 if decayed is None else decayed.rate

    def users(self) -> Iterator[UserKey]:
        """(VC, user) of everyone who held something since the ledger began."""
        return iter(sorted(self._recent))

    # -- internals ---------------------------------------------------------------------------------

    def _recent_of(self, key: UserKey, now: float) -> _Decayed:
        decayed = self._recent.get(key)
        if decayed is None:
            decayed = self._recent[key] = _Decayed(now)
        return decayed

    def _count(self, holding: _Holding, sign: int) -> None:
        key = holding.key
        held = self._held.get(key, Use())
        self._held[key] = Use(
            max(held.gpus + sign * holding.use.gpus, 0.0),
            max(held.cpus + sign * holding.use.cpus, 0.0),
        )
        jobs = self._jobs.setdefault(key, Counter())
        jobs[holding.job] += sign
        if jobs[holding.job] <= 0:
            del jobs[holding.job]
        if not jobs:
            del self._jobs[key]
            self._held.pop(key, None)
