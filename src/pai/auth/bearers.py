"""Who bears a token, remembered: every request carries a token, and reading its user and
groups from the store would be the largest part of a cheap request's work.

What is remembered holds while the store's identity epoch is unchanged: triggers raise it in
the transaction of any change to users, groups or memberships and of any deleted token (a
revocation, a removed user). The epoch is read at most every `ttl` seconds, so a change made
by another API worker is seen here within `ttl`; in the process that makes the change,
everything remembered is forgotten as soon as it commits, so there the change holds from the
next request. The signature and expiry of the token itself are checked on every request.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from itertools import chain
from typing import Any

from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction

from pai.store import Database
from pai.store.identity import TokenBearer, identity_epoch
from pai.store.models import Group, Token, User, memberships

DEFAULT_TTL_SECONDS = 2.0
"""How often the identity epoch is read: the longest a change made elsewhere goes unseen."""
MAX_ENTRIES = 100_000
"""Beyond this many tokens in use at once, the oldest are read again (memory stays bounded)."""

_CHANGED = "pai_identity_changed"
"""Session info key: this transaction changed users, groups or revoked tokens."""
_IDENTITY_TABLES = frozenset({User.__tablename__, Group.__tablename__, memberships.name})


class BearerCache:
    """Token hash -> bearer, valid while no identity change committed since it was read."""

    def __init__(
        self, ttl: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
    ):
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[str, TokenBearer] = {}
        self._generation = 0
        self._epoch: int | None = None
        self._epoch_read_at = -math.inf
        self._lock = threading.Lock()

    def watch(self, database: Database) -> None:
        """Forget everything whenever a transaction of `database` that changed users, groups,
        memberships or deleted tokens commits."""
        database.listen("after_flush", _note_flushed_changes)
        database.listen("do_orm_execute", _note_bulk_changes)
        database.listen("after_commit", self._after_commit)
        database.listen("after_rollback", lambda session: session.info.pop(_CHANGED, None))

    def generation(self) -> int:
        """Pass to `remember` what this was before reading a bearer from the store."""
        return self._generation

    def get(self, token_hash: str) -> TokenBearer | None:
        """The remembered bearer; None also when the epoch is due to be read (`check_epoch`)."""
        if self._clock() - self._epoch_read_at > self._ttl:
            return None
        return self._entries.get(token_hash)

    def check_epoch(self, session: Session) -> None:
        """Read the identity epoch if it is due, and forget everything if it moved."""
        if self._clock() - self._epoch_read_at <= self._ttl:
            return
        read_at = self._clock()
        epoch = identity_epoch(session)
        with self._lock:
            if epoch != self._epoch:
                self._generation += 1
                self._entries.clear()
                self._epoch = epoch
            self._epoch_read_at = read_at

    def remember(self, token_hash: str, bearer: TokenBearer, generation: int) -> None:
        """Keep `bearer`, read when the cache was at `generation`, unless a change committed
        since (then what was read may be older than the change)."""
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.pop(next(iter(self._entries)))
            self._entries[token_hash] = bearer

    def forget_all(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def _after_commit(self, session: Session) -> None:
        if session.info.pop(_CHANGED, False):
            self.forget_all()


def _note_flushed_changes(session: Session, _flush: UOWTransaction) -> None:
    changed = chain(session.new, session.dirty, session.deleted)
    if any(isinstance(item, (User, Group)) for item in changed) or any(
        isinstance(item, Token) for item in session.deleted
    ):
        session.info[_CHANGED] = True


def _note_bulk_changes(state: ORMExecuteState) -> None:
    if not (state.is_update or state.is_delete or state.is_insert):
        return
    table: Any = getattr(state.statement, "table", None)
    name = getattr(table, "name", None)
    if name in _IDENTITY_TABLES or (name == Token.__tablename__ and state.is_delete):
        state.session.info[_CHANGED] = True
