"""A controller's term: it acts only while it holds the lease, publishes its state for API
workers, and stops acting as soon as another controller has the lease."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import update

from pai.cluster import cluster_from_file
from pai.orchestrator.leadership import LEASE_ID, Leadership, LeaseTerms
from pai.orchestrator.published import PublishedState, StoredControlPlane, publish
from pai.orchestrator.term import ControllerTerm
from pai.platform import build_controller
from pai.runtime.exitspec import ExitSpecSource
from pai.store import Database
from pai.store.models import ControllerLease
from server.harness import LOCAL_CLUSTER_FILE, server_settings

SHORT = LeaseTerms(duration=1.0, renew_every=0.2, margin=0.3)


def test_a_controller_that_loses_its_lease_stops_acting(
    database: Database, pai_database_url: str, tmp_path: Path
) -> None:
    settings = server_settings(tmp_path / "home", pai_database_url)
    cluster = cluster_from_file(LOCAL_CLUSTER_FILE)
    controller, engine = build_controller(settings, cluster, database)
    lost = threading.Event()
    term = ControllerTerm(
        Leadership(database, "http://127.0.0.1:9187", terms=SHORT),
        controller,
        on_lost=lost.set,
    )
    assert term.begin()
    try:
        workers_view = StoredControlPlane(database, controller.secret_box, ExitSpecSource())
        workers_view.refresh()
        assert workers_view.cluster == cluster
        assert workers_view.address == "http://127.0.0.1:9187"
        assert set(workers_view.snapshot().vcs) == {"default", "research"}
        assert workers_view.fairness() == controller.fairness()  # users' use and fair share
        assert workers_view.fairness().half_life_s == settings.fair_share_half_life

        with database.session() as session:  # another controller took the lease meanwhile
            session.execute(
                update(ControllerLease)
                .where(ControllerLease.id == LEASE_ID)
                .values(holder="another", epoch=ControllerLease.epoch + 1)
            )
        assert lost.wait(timeout=5)
        deadline = time.monotonic() + 5
        while controller.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not controller.running
    finally:
        term.end()
        engine.close()


def test_an_api_worker_without_a_controller_says_so(database: Database) -> None:
    from pai.auth.sealing import SecretBox
    from pai.errors import ServiceUnavailableError

    workers_view = StoredControlPlane(database, SecretBox(b"k" * 32), ExitSpecSource())
    with pytest.raises(ServiceUnavailableError, match="no PAI controller has started yet"):
        _ = workers_view.cluster


def test_an_api_worker_reads_the_state_again_only_after_a_new_publication(
    database: Database, pai_database_url: str, tmp_path: Path
) -> None:
    """At thousands of nodes the state is megabytes: a worker that re-read it twice a second
    while nothing changed would spend a share of a core on it."""
    settings = server_settings(tmp_path / "home", pai_database_url)
    controller, engine = build_controller(settings, cluster_from_file(LOCAL_CLUSTER_FILE), database)
    leadership = Leadership(database, "http://127.0.0.1:9187", terms=SHORT)
    term = ControllerTerm(leadership, controller, on_lost=lambda: None)
    assert term.begin()
    try:
        workers_view = StoredControlPlane(database, controller.secret_box, ExitSpecSource())
        workers_view.refresh()
        vcs = set(workers_view.snapshot().vcs)
        assert vcs == {"default", "research"}

        with database.session() as session:  # the same version, other text: not read again
            session.execute(
                update(ControllerLease).where(ControllerLease.id == LEASE_ID).values(state="{")
            )
        workers_view.refresh()
        assert set(workers_view.snapshot().vcs) == vcs

        state = PublishedState.of(controller)
        fewer = replace(state.snapshot, vcs={"default": state.snapshot.vcs["default"]})
        publish(database, leadership, replace(state, snapshot=fewer))
        workers_view.refresh()
        assert set(workers_view.snapshot().vcs) == {"default"}
    finally:
        term.end()
        engine.close()
