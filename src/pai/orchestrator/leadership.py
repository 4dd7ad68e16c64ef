"""Exactly one controller acts at a time: a lease in the store.

A controller takes the lease when there is none or the last holder's has expired, and renews it
every few seconds. Another one waits, trying now and then, and takes over once the holder stops
renewing (it died, or lost the database). A holder stops acting as soon as it cannot be sure
it still holds the lease: when its own deadline (the expiry it last wrote, less a margin for
clocks that differ) has passed without a renewal. Since a successor takes over only after that
expiry, the two never act at once. The holder keeps trying to renew, though: a lease nobody
took meanwhile (the database was away for everybody: restarting, its disk full) is still its
own, and it acts again once a renewal succeeds. A renewal that finds another holder, or a
raised `epoch` (raised at each takeover), ends its term.

Clocks: expiries are written with the holder's clock and read with the successor's, so the
machines of a multi-machine deployment must keep their clocks in step (NTP) to within the
margin.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from pai.store import Database
from pai.store.failures import store_failure
from pai.store.models import ControllerLease

log = logging.getLogger(__name__)

LEASE_ID = 1


@dataclass(frozen=True)
class LeaseTerms:
    duration: float = 10.0  # seconds a lease lasts without renewal
    renew_every: float = 2.0
    margin: float = 2.0  # a holder stops this long before its lease expires

    @classmethod
    def lasting(cls, seconds: float) -> LeaseTerms:
        """Terms for a lease of `seconds`: renewed five times and given up a fifth before it
        runs out, so that a few slow renewals in a row do not lose it."""
        return cls(duration=seconds, renew_every=seconds / 5, margin=seconds / 5)


@dataclass(frozen=True)
class Holder:
    """Who holds the lease now, and where its internal API is."""

    holder: str
    address: str
    epoch: int
    expires_at: datetime


class Leadership:
    """One controller's side of the lease (`holder` names it in the store and the logs)."""

    def __init__(
        self,
        database: Database,
        address: str,
        *,
        terms: LeaseTerms | None = None,
        holder: str | None = None,
    ) -> None:
        self.database = database
        self.address = address
        self.terms = terms or LeaseTerms()
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.epoch: int | None = None
        self._deadline = 0.0  # monotonic: act no longer than this without a renewal
        self._next_renewal = 0.0
        self._failing_since: float | None = None  # monotonic: renewals fail since then
        self._store_away = False  # the last try to take the lease could not reach the store

    @property
    def held(self) -> bool:
        return self.epoch is not None and time.monotonic() < self._deadline

    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it (or the holder's has expired); not while the
        store cannot be reached: a standby waits through a store restart."""
        now = datetime.now(UTC)
        started = time.monotonic()
        try:
            epoch = self._take(now)
        except IntegrityError:  # another standby inserted the first lease at the same moment
            return False
        except Exception as error:
            if store_failure(error) is None:
                raise
            if not self._store_away:
                log.warning("%s cannot reach the store to take the lease: %s", self.holder, error)
            self._store_away = True
            return False
        self._store_away = False
        if epoch is None:
            return False
        self.epoch = epoch
        self._granted(started)
        log.info("%s holds the controller lease (epoch %d)", self.holder, epoch)
        return True

    def _take(self, now: datetime) -> int | None:
        with self.database.session() as session:
            lease = session.scalar(
                select(ControllerLease).where(ControllerLease.id == LEASE_ID).with_for_update()
            )
            if lease is None:
                lease = ControllerLease(id=LEASE_ID, epoch=0)
                session.add(lease)
            elif (
                lease.holder != self.holder
                and lease.expires_at > now
                and not _died_here(lease.holder)
            ):
                return None
            if lease.holder != self.holder or self.epoch is None:
                lease.epoch += 1
                lease.acquired_at = now
            lease.holder = self.holder
            lease.address = self.address
            lease.expires_at = now + timedelta(seconds=self.terms.duration)
            return lease.epoch

    def renew_if_due(self) -> bool:
        """Renew when due, and past the deadline at every call; False once the lease is lost
        to another controller (stop acting then, and start over as a standby)."""
        if self.epoch is None:
            return False
        if self.held and time.monotonic() < self._next_renewal:
            return True
        started = time.monotonic()
        try:
            with self.database.session() as session:
                lease = session.scalar(
                    select(ControllerLease).where(ControllerLease.id == LEASE_ID).with_for_update()
                )
                if lease is None or lease.holder != self.holder or lease.epoch != self.epoch:
                    self.epoch = None
                    return False
                lease.expires_at = datetime.now(UTC) + timedelta(seconds=self.terms.duration)
        except Exception as error:  # the database is away: act only until the deadline
            if self._failing_since is None:
                self._failing_since = started
                log.warning("%s could not renew the controller lease: %s", self.holder, error)
            return True
        if self._failing_since is not None:
            log.info(
                "%s renewed the controller lease again after %.1f s",
                self.holder,
                started - self._failing_since,
            )
            self._failing_since = None
        self._granted(started)
        return True

    def release(self) -> None:
        """Let a waiting controller take over at once (a clean stop)."""
        if self.epoch is None:
            return
        with self.database.session() as session:
            lease = session.get(ControllerLease, LEASE_ID)
            if lease is not None and lease.holder == self.holder and lease.epoch == self.epoch:
                lease.expires_at = datetime.now(UTC)
        self.epoch = None

    def _granted(self, started: float) -> None:
        """Counted from before the transaction, so the local deadline is never later than the
        expiry written."""
        self._deadline = started + self.terms.duration - self.terms.margin
        self._next_renewal = started + self.terms.renew_every


def _died_here(holder: str) -> bool:
    """Whether `holder` was a process of this machine that is gone (it crashed or was killed):
    its successor here need not wait for the lease to expire, which makes a restart after a
    crash as quick as a clean one."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def holder_name(database: Database) -> str:
    """Who holds the lease, for a standby's message: 'unknown' when nobody does or the store
    cannot be reached."""
    try:
        holder = current_holder(database)
    except Exception as error:
        if store_failure(error) is None:
            raise
        return "unknown"
    return holder.holder if holder else "unknown"


def current_holder(database: Database) -> Holder | None:
    """The controller that holds the lease now, if any does."""
    with database.reading() as session:
        lease = session.get(ControllerLease, LEASE_ID)
        if lease is None or lease.expires_at <= datetime.now(UTC):
            return None
        return Holder(lease.holder, lease.address, lease.epoch, lease.expires_at)
