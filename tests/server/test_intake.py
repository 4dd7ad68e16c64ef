"""Group commit of submissions (`SubmissionIntake`) on each backend: jobs that arrive together
are written in one transaction, and each still gets its own answer (accepted, over its user's
limit, or a name its user has already)."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import func, select

import pai.store.recordsets as recordsets
from pai.auth.sealing import SecretBox
from pai.cluster import cluster_from_file
from pai.errors import ConflictJobError, TooManyRequestsError
from pai.orchestrator.intents import PreparedJob, prepare_job
from pai.server.intake import BATCH_INTERVAL, SubmissionIntake
from pai.server.ratelimit import StoredRateLimiter
from pai.store import Database
from pai.store.models import JobRow
from pai.store.types import utcnow
from server.harness import LOCAL_CLUSTER_FILE

CLUSTER = cluster_from_file(LOCAL_CLUSTER_FILE)
BOX = SecretBox(b"c" * 32)


def prepared(username: str, name: str) -> PreparedJob:
    text = f"""protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: image, uri: "python:3.11"}}
taskRoles:
  main:
    instances: 1
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 512, gpu: 0}}
    commands: [echo hi]
"""
    return prepare_job(CLUSTER, BOX, username=username, text=text, may_use_vc=lambda _: True)


def record_together(
    intake: SubmissionIntake, jobs: list[PreparedJob]
) -> list[BaseException | None]:
    async def all_at_once() -> list[BaseException | None]:
        answers = await asyncio.gather(
            *(intake.record(job) for job in jobs), return_exceptions=True
        )
        return [answer if isinstance(answer, BaseException) else None for answer in answers]

    return asyncio.run(all_at_once())


def stored(database: Database) -> list[tuple[str, str]]:
    with database.reading() as session:
        rows = session.execute(select(JobRow.username, JobRow.name).order_by(JobRow.id)).all()
    return [(row.username, row.name) for row in rows]


def test_jobs_that_arrive_together_share_one_transaction(database: Database) -> None:
    commits: list[int] = []
    database.listen("after_commit", lambda _session: commits.append(1))
    wakes: list[int] = []
    limiter = StoredRateLimiter("submission", 1000, 3600, what="job submissions")
    intake = SubmissionIntake(database, limiter, lambda: wakes.append(1))
    jobs = [prepared(f"user{index % 5}", f"job-{index}") for index in range(40)]
    assert record_together(intake, jobs) == [None] * 40
    assert len(stored(database)) == 40
    assert len(commits) == 1
    assert len(wakes) == 1  # the controller is told once per batch


class Gathering:
    """How long an intake let its batches gather (it waits as asked)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(seconds)


def test_a_stream_of_submissions_shares_transactions(database: Database) -> None:
    """Submissions arriving one after another (here one a millisecond), not all at once, and
    faster than a batch is written (here 5 ms each): after a batch is written, the next
    gathers for the batch interval instead of being written at once, so a process commits at
    most one batch per interval."""
    commits: list[int] = []
    database.listen("after_commit", lambda _session: commits.append(1))

    class SlowWrites(StoredRateLimiter):
        def acquire_many(self, session, counts):  # type: ignore[no-untyped-def]
            time.sleep(0.005)  # in the writing thread
            return super().acquire_many(session, counts)

    limiter = SlowWrites("submission", 1000, 3600, what="job submissions")
    gathering = Gathering()
    intake = SubmissionIntake(database, limiter, lambda: None, gather=gathering)

    async def one_a_millisecond() -> float:
        started = time.monotonic()
        submitted = []
        for index in range(30):
            submitted.append(asyncio.create_task(intake.record(prepared("erin", f"job-{index}"))))
            await asyncio.sleep(0.001)
        await asyncio.gather(*submitted)
        return time.monotonic() - started

    elapsed = asyncio.run(one_a_millisecond())
    assert len(stored(database)) == 30
    assert gathering.waits
    assert len(commits) <= 2 + elapsed / BATCH_INTERVAL, (len(commits), elapsed)


def test_a_client_submitting_one_job_after_another_is_not_held_back(database: Database) -> None:
    """Each job finds no batch being written: it is written at once, never made to gather."""
    limiter = StoredRateLimiter("submission", 1000, 3600, what="job submissions")
    gathering = Gathering()
    intake = SubmissionIntake(database, limiter, lambda: None, gather=gathering)

    async def one_after_another() -> None:
        for index in range(10):
            await intake.record(prepared("frank", f"job-{index}"))

    asyncio.run(one_after_another())
    assert len(stored(database)) == 10
    assert gathering.waits == []


def test_each_job_of_a_batch_gets_its_own_answer(database: Database) -> None:
    limiter = StoredRateLimiter("submission", 3, 3600, what="job submissions")
    intake = SubmissionIntake(database, limiter, lambda: None)
    assert record_together(intake, [prepared("alice", "taken")]) == [None]
    jobs = [
        prepared("alice", "taken"),  # alice has it already
        prepared("bob", "twice"),
        prepared("bob", "twice"),  # the same name twice in one batch: the first is kept
        prepared("alice", "new"),
        prepared("alice", "over"),  # alice's fourth submission this hour
        prepared("bob", "third"),
    ]
    answers = record_together(intake, jobs)
    assert [type(answer).__name__ for answer in answers] == [
        "ConflictJobError",
        "NoneType",
        "ConflictJobError",
        "NoneType",
        "TooManyRequestsError",
        "NoneType",
    ]
    assert isinstance(answers[0], ConflictJobError)
    assert "job 'alice~taken' already exists" in answers[0].message
    refused = answers[4]
    assert isinstance(refused, TooManyRequestsError)
    assert "at most 3 per hour" in refused.message
    assert refused.retry_after is not None and refused.retry_after > 0
    assert stored(database) == [
        ("alice", "taken"),
        ("bob", "twice"),
        ("alice", "new"),
        ("bob", "third"),
    ]


def test_a_batch_that_fails_records_none_of_its_jobs(database: Database) -> None:
    """A failing transaction (here: its rate-limit statement) refuses all its jobs and leaves
    nothing behind; the next batch is written as usual."""

    class FailingOnce(StoredRateLimiter):
        failed = False

        def acquire_many(self, session, counts):  # type: ignore[no-untyped-def]
            granted = super().acquire_many(session, counts)
            if not self.failed:
                self.failed = True
                raise RuntimeError("the database went away")
            return granted

    intake = SubmissionIntake(
        database, FailingOnce("submission", 100, 3600, what="x"), lambda: None
    )
    answers = record_together(intake, [prepared("carol", f"lost-{index}") for index in range(3)])
    assert all(isinstance(answer, RuntimeError) for answer in answers)
    with database.reading() as session:
        assert session.scalar(select(func.count()).select_from(JobRow)) == 0
    assert record_together(intake, [prepared("carol", "lost-0")]) == [None]
    assert stored(database) == [("carol", "lost-0")]


@pytest.mark.parametrize("size", [1, 300])
def test_any_number_of_jobs_is_written(database: Database, size: int) -> None:
    limiter = StoredRateLimiter("submission", 1000, 3600, what="job submissions")
    intake = SubmissionIntake(database, limiter, lambda: None)
    jobs = [prepared("dave", f"job-{index}") for index in range(size)]
    assert record_together(intake, jobs) == [None] * size
    assert len(stored(database)) == size


def test_a_recorded_job_holds_what_was_submitted(database: Database) -> None:
    """What the store keeps of a submission is its checked values, unchanged (text with quotes,
    backslashes and non-ASCII, the parsed job, its sealed secrets), a state to wait in, and
    the time it was written."""
    text = """protocolVersion: 2
name: exact
type: job
secrets: {token: "s3cr3t"}
prerequisites:
  - {type: dockerimage, name: image, uri: "python:3.11"}
taskRoles:
  main:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
    commands: ['echo "ünïcödé \\\\ <% $secrets.token %>"']
"""
    job = prepare_job(CLUSTER, BOX, username="erin", text=text, may_use_vc=lambda _: True)
    intake = SubmissionIntake(
        database, StoredRateLimiter("submission", 10, 3600, what="x"), lambda: None
    )
    before = utcnow()
    assert record_together(intake, [job]) == [None]
    with database.reading() as session:
        row = session.scalars(select(JobRow)).one()
    assert row.job_text == job.values["job_text"] and "ünïcödé \\\\" in row.job_text
    assert row.spec == job.values["spec"]
    assert row.sealed_secrets is not None
    assert BOX.open(row.sealed_secrets) == {"token": "s3cr3t"}
    assert (row.state, row.sub_state, row.execution_type, row.retries) == (
        "WAITING",
        "AttemptCreationPending",
        "START",
        0,
    )
    assert row.status is None and row.allocations == []
    assert before <= row.submitted_at <= utcnow()


def test_a_batch_too_long_for_one_statement_is_written_in_several_alike(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a batch's rows travel as JSON documents of bounded length (here about one
    job each): the jobs are kept in order, and a name repeated in a later document is refused
    as in one statement."""
    monkeypatch.setattr(recordsets, "MAX_DOCUMENT_CHARACTERS", 1000)
    intake = SubmissionIntake(
        database, StoredRateLimiter("submission", 100, 3600, what="x"), lambda: None
    )
    jobs = [prepared("fay", name) for name in ("one", "two", "three", "two", "four")]

    answers = record_together(intake, jobs)

    assert [answer is None for answer in answers] == [True, True, True, False, True]
    assert isinstance(answers[3], ConflictJobError)
    assert stored(database) == [("fay", "one"), ("fay", "two"), ("fay", "three"), ("fay", "four")]
