"""Work that may lag a little, paced by what it costs.

Publishing the controller's view of the cluster (the scheduler's snapshot, jobs per VC) costs in
proportion to the cluster: about a millisecond at ten nodes, tens of milliseconds at thousands.
Done after every pass it took most of a 5,000-node controller's time (`benchmarks/scale.py`),
and reading it back most of each API worker's. A `Pace` lets such work take at most a share of
its thread's time: after a run that took t seconds the next is due t / share later. Work that
costs less than `free_below` is never held back, so a small cluster's view is fresh after every
pass, and a large one's trails it by a delay bounded by its cost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Pace:
    def __init__(self, share: float, *, free_below: float = 0.005) -> None:
        """`share`: of the thread's time the work may take; `free_below`: seconds a run may take
        and leave the next due at once."""
        self._share = share
        self._free_below = free_below
        self._next = 0.0

    def wait(self) -> float:
        """Seconds until the work is due again (0 when it is)."""
        return max(0.0, self._next - time.monotonic())

    @contextmanager
    def run(self) -> Iterator[None]:
        """Time one run of the work, which sets when the next is due."""
        started = time.monotonic()
        try:
            yield
        finally:
            cost = time.monotonic() - started
            self._next = started + (cost / self._share if cost >= self._free_below else 0.0)
