"""Job counts per user, VC and state follow every change of the jobs, on both backends, and
a database that had jobs before the counts existed gets them counted."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from alembic import command
from sqlalchemy import delete, insert, select, update

from pai.store import Database
from pai.store.database import alembic_config
from pai.store.models import JobCount, JobRow


def job(number: int, username: str, vc: str, state: str = "WAITING") -> dict[str, object]:
    return {
        "username": username,
        "name": f"job-{number}",
        "virtual_cluster": vc,
        "priority_class": "test",
        "submitted_at": datetime.now(UTC),
        "job_text": "",
        "spec": {},
        "total_tasks": 1,
        "total_gpus": 0,
        "total_roles": 1,
        "state": state,
    }


def counts(database: Database) -> Counter[tuple[str, str, str]]:
    with database.reading() as session:
        rows = session.execute(select(JobCount)).scalars()
        return Counter({(r.username, r.virtual_cluster, r.state): r.count for r in rows if r.count})


def actual(database: Database) -> Counter[tuple[str, str, str]]:
    with database.reading() as session:
        rows = session.execute(select(JobRow.username, JobRow.virtual_cluster, JobRow.state))
        return Counter(tuple(row) for row in rows)


def test_counts_follow_inserts_state_changes_and_deletes(database: Database) -> None:
    with database.session() as session:
        session.execute(
            insert(JobRow),
            [job(n, f"user{n % 3}", "default" if n % 2 else "research") for n in range(30)],
        )
    assert (
        counts(database)
        == actual(database)
        == Counter(
            {
                ("user0", "research", "WAITING"): 5,
                ("user0", "default", "WAITING"): 5,
                ("user1", "default", "WAITING"): 5,
                ("user1", "research", "WAITING"): 5,
                ("user2", "research", "WAITING"): 5,
                ("user2", "default", "WAITING"): 5,
            }
        )
    )
    with database.session() as session:
        session.execute(update(JobRow).where(JobRow.id <= 10).values(state="RUNNING"))
        session.execute(update(JobRow).where(JobRow.id <= 4).values(state="SUCCEEDED"))
        session.execute(update(JobRow).where(JobRow.id == 20).values(retries=1))  # not counted
        session.execute(delete(JobRow).where(JobRow.id.in_([2, 15])))
    assert counts(database) == actual(database)
    assert sum(counts(database).values()) == 28


def test_jobs_stored_before_the_counts_are_counted_by_the_upgrade(pai_database_url: str) -> None:
    database = Database(pai_database_url)
    with database.exclusive() as connection:
        command.upgrade(alembic_config(connection), "0006_controller_lease")
    with database.session() as session:
        session.execute(insert(JobRow), [job(n, "alice", "default", "SUCCEEDED") for n in range(7)])
    with database.exclusive() as connection:
        database.upgrade(connection)
    assert counts(database) == Counter({("alice", "default", "SUCCEEDED"): 7})
    database.dispose()
