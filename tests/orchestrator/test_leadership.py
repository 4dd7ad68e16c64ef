"""The controller lease: one holder at a time, a standby takes over once the holder stops."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from pai.chaos.postgres import PostgresCluster
from pai.executors.hollow.cluster import hollow_cluster
from pai.orchestrator.leadership import Leadership, LeaseTerms, current_holder, holder_name
from pai.platform import Engine, open_engine
from pai.runtime.exitspec import ExitSpecSource
from pai.store import Database
from server.harness import server_settings

SHORT = LeaseTerms(duration=3.0, renew_every=0.5, margin=1.0)
"""Short, and still long enough for a renewal on a machine loaded by the rest of the suite (a
1 s lease lapsed there between two renewals)."""


def test_one_holder_at_a_time_and_a_clean_release_hands_over_at_once(database: Database) -> None:
    first = Leadership(database, "http://10.0.0.1:9187", terms=SHORT, holder="first")
    second = Leadership(database, "http://10.0.0.2:9187", terms=SHORT, holder="second")

    assert first.try_acquire() and first.held
    assert not second.try_acquire()
    assert current_holder(database).address == "http://10.0.0.1:9187"  # type: ignore[union-attr]

    first.release()
    assert second.try_acquire()
    holder = current_holder(database)
    assert holder is not None and (holder.holder, holder.epoch) == ("second", 2)


def test_a_holder_that_stops_renewing_is_replaced_and_learns_it(database: Database) -> None:
    first = Leadership(database, "a", terms=SHORT, holder="first")
    second = Leadership(database, "b", terms=SHORT, holder="second")
    assert first.try_acquire()

    time.sleep(SHORT.duration + 0.1)  # the first one hangs: no renewal
    assert not first.held  # it stopped acting before its lease expired
    assert second.try_acquire()

    assert not first.renew_if_due()
    assert first.epoch is None and second.held


def test_a_renewing_holder_keeps_the_lease(database: Database) -> None:
    first = Leadership(database, "a", terms=SHORT, holder="first")
    second = Leadership(database, "b", terms=SHORT, holder="second")
    assert first.try_acquire()

    deadline = time.monotonic() + 2 * SHORT.duration
    while time.monotonic() < deadline:
        assert first.renew_if_due()
        assert not second.try_acquire()
        time.sleep(0.05)


def test_a_holder_of_this_machine_that_died_is_replaced_at_once(database: Database) -> None:
    """A controller restarted after a crash need not wait for its dead predecessor's lease."""
    dead = Leadership(database, "a", holder=f"{socket.gethostname()}:{_dead_pid()}:x")
    alive = Leadership(database, "b", holder=f"{socket.gethostname()}:{os.getpid()}:y")
    assert dead.try_acquire()  # a long lease (10 s) that nobody renews
    successor = Leadership(database, "c")
    assert successor.try_acquire()

    assert alive.try_acquire() is False  # the successor lives: it keeps its lease
    assert current_holder(database).holder == successor.holder  # type: ignore[union-attr]


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_standby_waits_through_a_store_restart_and_then_takes_over(
    restartable_postgres: PostgresCluster,
) -> None:
    """A standby that met the store away used to end with the store's error: its supervisor
    then started it again, which takes many seconds more (a Ray cluster to join)."""
    database = Database(restartable_postgres.url)
    with database.exclusive() as connection:
        database.upgrade(connection)
    holder = Leadership(database, "a", terms=SHORT, holder="holder")
    standby = Leadership(database, "b", terms=SHORT, holder="standby")
    assert holder.try_acquire()

    restartable_postgres.pause()
    try:
        assert standby.try_acquire() is False
        assert holder_name(database) == "unknown"  # what its message says meanwhile
    finally:
        restartable_postgres.resume()

    deadline = time.monotonic() + 3 * SHORT.duration  # the holder hangs: its lease runs out
    while not standby.try_acquire():
        assert time.monotonic() < deadline, "the standby did not take over"
        time.sleep(0.1)
    assert current_holder(database).holder == "standby"  # type: ignore[union-attr]
    database.dispose()


def test_a_controller_that_took_the_lease_as_the_store_stopped_opens_its_engine_once_it_is_back(
    restartable_postgres: PostgresCluster, tmp_path: Path
) -> None:
    """The engine is named after the store: the chaos run caught a new controller reading that
    name just as PostgreSQL stopped, and ending with the store's error."""
    database = Database(restartable_postgres.url)
    with database.exclusive() as connection:
        database.upgrade(connection)
    settings = server_settings(tmp_path, restartable_postgres.url, engine="hollow")
    opened: list[Engine] = []
    restartable_postgres.pause()
    opening = threading.Thread(
        target=lambda: opened.append(
            open_engine(settings, hollow_cluster(2), ExitSpecSource(), database)
        )
    )
    opening.start()
    try:
        time.sleep(2)
        assert opening.is_alive()  # waiting, not failed
    finally:
        restartable_postgres.resume()
    opening.join(timeout=60)
    assert len(opened) == 1
    assert set(opened[0].executor.node_states()) == {"hollow-00001", "hollow-00002"}
    opened[0].close()
    database.dispose()
