"""A controller's term: it acts only while its process holds the lease.

`begin()` waits for the lease (a standby waits here until the holder stops renewing), then
recovers the store's and the engine's state and starts acting; while the term lasts, a keeper
renews the lease and publishes the controller's state for API workers. A holder that cannot
renew in time pauses (the controller acts only while the lease is held) and goes on once a
renewal succeeds; one that lost the lease to another controller stops acting at once and calls
`on_lost`: the process should then exit, so that its supervisor starts it again as a standby
with a clean state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from pai.orchestrator.controller import Controller
from pai.orchestrator.leadership import Leadership, holder_name
from pai.orchestrator.published import PublishedState, publish

log = logging.getLogger(__name__)

PUBLISH_EVERY = 0.5
"""Seconds between checks of the lease and of the state API workers show."""


class ControllerTerm:
    def __init__(
        self,
        leadership: Leadership,
        controller: Controller,
        *,
        companions: Sequence[tuple[Callable[[], None], Callable[[], None]]] = (),
        on_lost: Callable[[], None],
    ) -> None:
        """`companions` are (start, stop) pairs of what acts with the controller (monitoring,
        alert actions), started after it and stopped before it."""
        self._leadership = leadership
        self._controller = controller
        self._companions = companions
        self._on_lost = on_lost
        self._stopping = threading.Event()
        self._keeper: threading.Thread | None = None
        self._acting = False
        self._publish_failing = False

    def begin(self) -> bool:
        """Wait for the lease and start acting; False if `end()` was called first."""
        announced = False
        while not self._leadership.try_acquire():
            if not announced:
                log.warning(
                    "another controller (%s) holds the lease: waiting to take over",
                    holder_name(self._leadership.database),
                )
                announced = True
            if self._stopping.wait(self._leadership.terms.renew_every):
                return False
        self._controller.may_act = lambda: self._leadership.held
        self._controller.start()
        for start, _ in self._companions:
            start()
        self._acting = True
        self._publish()
        self._keeper = threading.Thread(target=self._keep, name="pai-lease", daemon=True)
        self._keeper.start()
        return True

    def end(self) -> None:
        """Stop acting and hand the lease over (a clean stop)."""
        self._stopping.set()
        if self._keeper is not None:
            self._keeper.join(timeout=10)
        self._stop_acting()
        self._leadership.release()

    def _keep(self) -> None:
        published = PublishedState.of(self._controller)
        while not self._stopping.wait(PUBLISH_EVERY):
            if not self._leadership.renew_if_due():
                log.critical(
                    "%s lost the controller lease: it stops acting", self._leadership.holder
                )
                self._stop_acting()
                self._on_lost()
                return
            state = PublishedState.of(self._controller)
            if state != published and self._publish(state):
                published = state

    def _publish(self, state: PublishedState | None = None) -> bool:
        try:
            publish(
                self._leadership.database,
                self._leadership,
                state or PublishedState.of(self._controller),
            )
        except Exception as error:  # the store is away: the next round publishes again
            if not self._publish_failing:
                log.warning("could not publish the controller's state: %s", error)
            self._publish_failing = True
            return False
        self._publish_failing = False
        return True

    def _stop_acting(self) -> None:
        if not self._acting:
            return
        self._acting = False
        for _, stop in reversed(self._companions):
            stop()
        self._controller.stop()
