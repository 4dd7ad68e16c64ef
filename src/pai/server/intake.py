"""Group commit of submissions: the jobs that arrive while one batch is written are written
together by the next, in one transaction.

A submission's cost in the store is mostly per transaction (taking a connection, the round
trips of BEGIN and COMMIT, the commit's flush to disk, and about a millisecond of the API
process's CPU), not per row. Each API process writes one batch at a time. A submission that
finds no batch being written is written at once, so a client that submits one job after
another waits for nothing but its own write. Submissions that arrive while a batch is written
are a stream: the next batch then gathers until `BATCH_INTERVAL` after the start of the last,
so a process writes at most one batch per interval however many arrive, and each waits at most
the interval more. A request is answered only once its batch is committed, so an accepted job
is never lost; a batch that fails refuses all its jobs and leaves none of them behind.

The submission rate limit is counted in the same transaction, per user for the whole batch.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence

from starlette.concurrency import run_in_threadpool

from pai.orchestrator.intents import PreparedJob, record_jobs
from pai.server.ratelimit import StoredRateLimiter
from pai.store import Database

MAX_BATCH = 256
"""The most jobs one transaction writes (a statement's size stays well within the drivers'
limits on parameters)."""
BATCH_INTERVAL = 0.04
"""Under a stream of submissions, seconds from the start of one batch's write to the start of
the next, unless the next is full: at most 25 batches a second per process."""


class SubmissionIntake:
    """Records prepared jobs in batches; `wake` tells the controller once per batch."""

    def __init__(
        self,
        database: Database,
        limiter: StoredRateLimiter,
        wake: Callable[[], None],
        *,
        gather: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._database = database
        self._limiter = limiter
        self._wake = wake
        self._gather = gather
        """Waits the given seconds while a batch gathers."""
        self._pending: list[tuple[PreparedJob, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._last_write = -BATCH_INTERVAL
        """When the last batch started to be written (the event loop's clock)."""

    async def record(self, job: PreparedJob) -> None:
        """Return once `job` is committed; raise why it was refused (rate limit, a name its
        user has already, the store failing)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((job, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_pending())
        await asyncio.shield(future)  # a client that leaves does not undo its job

    async def _write_pending(self) -> None:
        """Write what is pending, batch after batch: the first at once, the next ones (jobs
        that arrived during a write) after gathering for the rest of the interval."""
        loop = asyncio.get_running_loop()
        streaming = False
        while self._pending:
            gather = self._last_write + BATCH_INTERVAL - loop.time()
            if streaming and gather > 0 and len(self._pending) < MAX_BATCH:
                await self._gather(gather)
            streaming = True
            self._last_write = loop.time()
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            jobs = [job for job, _ in batch]
            try:
                outcomes = await run_in_threadpool(self._write, jobs)
            except Exception as failure:  # the transaction rolled back: nothing was recorded
                outcomes = [failure] * len(batch)
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if outcome is None:
                    future.set_result(None)
                else:
                    future.set_exception(outcome)
            if any(outcome is None for outcome in outcomes):
                self._wake()

    def _write(self, jobs: Sequence[PreparedJob]) -> list[Exception | None]:
        """One transaction: count the batch against each user's limit, insert the jobs that
        fit; for each job, None or why it was refused."""
        outcomes: list[Exception | None] = [None] * len(jobs)
        by_user: dict[str, list[int]] = defaultdict(list)
        for index, job in enumerate(jobs):
            by_user[job.username].append(index)
        with self._database.session() as session:
            admissions = self._limiter.acquire_many(
                session, {username: len(indexes) for username, indexes in by_user.items()}
            )
            for username, indexes in by_user.items():
                granted, refusal = admissions[username]
                for index in indexes[granted:]:
                    outcomes[index] = refusal
            admitted = [index for index, outcome in enumerate(outcomes) if outcome is None]
            conflicts = record_jobs(session, [jobs[index] for index in admitted])
            for index, conflict in zip(admitted, conflicts, strict=True):
                outcomes[index] = conflict
        return outcomes
