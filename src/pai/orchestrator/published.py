"""The controller's state, published in the store for API workers in other processes.

The controller that holds the lease writes its cluster and its view after the last pass (the
scheduler's snapshot, jobs per VC, node states) into the lease's row, at most a few times a
second and only when it changed; an API worker reads it from there, so that the portal and
`/api/v2/virtual-clusters` show what the controller sees without asking it. A submission or a
stop reaches the controller through the store too; a datagram to the holder's address only
says "look now" (see `wakeups`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import TypeAdapter
from sqlalchemy import select, update

from pai.auth.sealing import SecretBox
from pai.cluster.model import ClusterConfig
from pai.errors import ServiceUnavailableError
from pai.executors.base import NodeState
from pai.orchestrator.controller import Controller, VcJobs
from pai.orchestrator.leadership import LEASE_ID, Leadership
from pai.orchestrator.wakeups import send_wakeup
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.types import ClusterSnapshot
from pai.store import Database
from pai.store.models import ControllerLease


@dataclass(frozen=True)
class PublishedState:
    cluster: ClusterConfig
    snapshot: ClusterSnapshot
    vc_jobs: dict[str, VcJobs]
    node_states: dict[str, NodeState]

    @classmethod
    def of(cls, controller: Controller) -> PublishedState:
        return cls(
            controller.cluster,
            controller.snapshot(),
            dict(controller.vc_jobs()),
            dict(controller.node_states()),
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
            .values(state=_STATE.dump_json(state).decode())
        )


@dataclass(frozen=True)
class _Reading:
    state: PublishedState
    address: str
    read_at: float


class StoredControlPlane:
    """The `ControlPlane` of an API worker: the controller's state as published in the store
    (re-read when older than `max_age` seconds), and wake-ups sent to its address."""

    def __init__(
        self,
        database: Database,
        secret_box: SecretBox,
        exit_specs: ExitSpecSource,
        *,
        max_age: float = 0.5,
    ) -> None:
        self._database = database
        self._box = secret_box
        self._exit_specs = exit_specs
        self._max_age = max_age
        self._reading: _Reading | None = None
        self._raw = ""
        self._lock = threading.Lock()

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

    def wake(self) -> None:
        send_wakeup(self.address)

    def _read(self) -> _Reading:
        with self._lock:
            now = time.monotonic()
            if self._reading is None or now - self._reading.read_at > self._max_age:
                self._reading = self._load(now)
            return self._reading

    def _load(self, now: float) -> _Reading:
        with self._database.reading() as session:
            row = session.execute(
                select(ControllerLease.state, ControllerLease.address).where(
                    ControllerLease.id == LEASE_ID
                )
            ).one_or_none()
        if row is None or not row.state:
            raise ServiceUnavailableError(
                "no PAI controller has started yet: start one (`pai serve controller`) "
                "against this database"
            )
        if row.state != self._raw or self._reading is None:
            state = _STATE.validate_json(row.state)
            self._raw = row.state
        else:
            state = self._reading.state
        return _Reading(state, row.address, now)
