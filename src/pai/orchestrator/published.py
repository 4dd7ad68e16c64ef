"""The controller's state, published in the store for API workers in other processes.

The controller that holds the lease writes its cluster and its view after the last pass (the
scheduler's snapshot, jobs per VC, node states) into the lease's row, at most a few times a
second and only when it changed; an API worker reads it from there, so that the portal and
`/api/v2/virtual-clusters` show what the controller sees without asking it. A submission or a
stop reaches the controller through the store too; a datagram to the holder's address only
says "look now" (see `wakeups`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import TypeAdapter
from sqlalchemy import select, update

from pai.auth.sealing import SecretBox
from pai.cluster.model import ClusterConfig
from pai.errors import ServiceUnavailableError
from pai.executors.base import NodeState
from pai.orchestrator.controller import Controller, VcJobs
from pai.orchestrator.fairness import FairnessState
from pai.orchestrator.leadership import LEASE_ID, Leadership
from pai.orchestrator.pacing import Pace
from pai.orchestrator.wakeups import send_wakeup
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.types import ClusterSnapshot
from pai.store import Database
from pai.store.models import ControllerLease

log = logging.getLogger(__name__)
READING_SHARE = 0.1
"""Of an API worker's time, the most that reading the published state again may take
(`pacing`): at 5,000 nodes under load, reading every publication took most of each worker's."""


@dataclass(frozen=True)
class PublishedState:
    cluster: ClusterConfig
    snapshot: ClusterSnapshot
    vc_jobs: dict[str, VcJobs]
    node_states: dict[str, NodeState]
    fairness: FairnessState = field(default_factory=FairnessState)
    """Absent from what a controller of an older version published: no users shown."""

    @classmethod
    def of(cls, controller: Controller) -> PublishedState:
        return cls(
            controller.cluster,
            controller.snapshot(),
            dict(controller.vc_jobs()),
            dict(controller.node_states()),
            controller.fairness(),
        )


_STATE = TypeAdapter(PublishedState)


def publish(database: Database, leadership: Leadership, state: PublishedState) -> None:
    """Write `state` into the lease's row, if this controller still holds it."""
    with database.session() as session:
        session.execute(
            update(ControllerLease)
            .where(
                ControllerLease.id == LEASE_ID,
                ControllerLease.holder == leadership.holder,
                ControllerLease.epoch == leadership.epoch,
            )
            .values(
                state=_STATE.dump_json(state).decode(),
                state_version=ControllerLease.state_version + 1,
            )
        )


@dataclass(frozen=True)
class _Reading:
    state: PublishedState
    address: str


class StoredControlPlane:
    """The `ControlPlane` of an API worker: the controller's state as published in the store,
    and wake-ups sent to its address.

    A thread of its own re-reads the store every `refresh_every` seconds (`start()`): a request
    only reads memory. Reading the store on the request's path would take a second database
    connection while the request holds one, and a burst of requests holding every connection
    of the pool would then wait for each other until the pool's timeout."""

    def __init__(
        self,
        database: Database,
        secret_box: SecretBox,
        exit_specs: ExitSpecSource,
        *,
        refresh_every: float = 0.5,
    ) -> None:
        self._database = database
        self._box = secret_box
        self._exit_specs = exit_specs
        self._refresh_every = refresh_every
        self._reading: _Reading | None = None
        self._version = -1
        self._reading_pace = Pace(READING_SHARE)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def cluster(self) -> ClusterConfig:
        return self._read().state.cluster

    @property
    def secret_box(self) -> SecretBox:
        return self._box

    @property
    def exit_specs(self) -> ExitSpecSource:
        return self._exit_specs

    @property
    def address(self) -> str:
        """Where the controller serves the API that only it can answer (task logs, metrics)."""
        return self._read().address

    def snapshot(self) -> ClusterSnapshot:
        return self._read().state.snapshot

    def vc_jobs(self) -> Mapping[str, VcJobs]:
        return self._read().state.vc_jobs

    def node_states(self) -> Mapping[str, NodeState]:
        return self._read().state.node_states

    def fairness(self) -> FairnessState:
        return self._read().state.fairness

    def wake(self) -> None:
        send_wakeup(self.address)

    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(
            target=self._keep_fresh, name="pai-published-state", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def refresh(self) -> None:
        """Read what the controller published last, if it published since the last reading."""
        with self._database.reading() as session:
            row = session.execute(
                select(ControllerLease.state_version, ControllerLease.address).where(
                    ControllerLease.id == LEASE_ID
                )
            ).one_or_none()
            if row is None:
                return
            if self._reading is None or row.state_version != self._version:
                published = session.execute(
                    select(ControllerLease.state, ControllerLease.state_version).where(
                        ControllerLease.id == LEASE_ID
                    )
                ).one()
                if not published.state:
                    return
                with self._reading_pace.run():
                    state = _STATE.validate_json(published.state)
                self._reading = _Reading(state, row.address)
                self._version = published.state_version
            elif row.address != self._reading.address:
                self._reading = _Reading(self._reading.state, row.address)

    def _keep_fresh(self) -> None:
        while not self._stopping.wait(max(self._refresh_every, self._reading_pace.wait())):
            try:
                self.refresh()
            except Exception:  # the store is away: show the last state until it is back
                log.warning("could not read the controller's published state", exc_info=True)

    def _read(self) -> _Reading:
        reading = self._reading
        if reading is None:
            raise ServiceUnavailableError(
                "no PAI controller has started yet: start one (`pai serve controller`) "
                "against this database"
            )
        return reading
