"""Tokens: signed, recorded by hash only, revocable, expiring."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timedelta

import jwt
import pytest
import sqlalchemy

from pai.auth.directory import Directory
from pai.auth.tokens import TokenService, token_hash
from pai.errors import ForbiddenUserError, UnauthorizedUserError
from pai.store import Database, Token, identity
from pai.store.types import utcnow

KEY = b"k" * 32


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


def issue(database: Database, service: TokenService, lifetime: timedelta | None) -> str:
    with database.session() as session:
        user = identity.find_user(session, "admin")
        assert user is not None
        return service.issue(session, user, lifetime=lifetime).token


def verify(database: Database, service: TokenService, token: str) -> str:
    with database.session() as session:
        claims = service.decode(token)
        service.verify(session, claims)
        return claims.username


def test_an_issued_token_carries_the_openpai_payload(database: Database) -> None:
    service = TokenService(KEY)
    token = issue(database, service, timedelta(hours=2))
    payload = jwt.decode(token, KEY, algorithms=["HS256"])
    assert payload["username"] == "admin"
    assert payload["application"] is False
    assert payload["exp"] - payload["iat"] == 7200
    application = jwt.decode(issue(database, service, None), KEY, algorithms=["HS256"])
    assert application["application"] is True
    assert "exp" not in application


def test_only_the_hash_of_a_token_is_stored(database: Database) -> None:
    token = issue(database, TokenService(KEY), timedelta(hours=1))
    with database.engine.connect() as connection:
        rows = connection.execute(sqlalchemy.select(Token.__table__)).all()
    stored = repr(rows)
    assert token not in stored
    assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert token_hash(token) == hashlib.sha256(token.encode()).hexdigest()


def test_a_revoked_token_no_longer_verifies(database: Database) -> None:
    service = TokenService(KEY)
    token = issue(database, service, timedelta(hours=1))
    assert verify(database, service, token) == "admin"
    with database.session() as session:
        admin = identity.find_user(session, "admin")
        assert admin is not None
        service.revoke(session, admin, token_hash(token).upper())  # by hash, any case
    with pytest.raises(UnauthorizedUserError, match="revoked"):
        verify(database, service, token)


def test_an_expired_token_is_refused_and_its_record_purged_later(database: Database) -> None:
    clock = Clock()
    service = TokenService(KEY, clock=clock)
    clock.now = utcnow() - timedelta(days=1)
    expired = issue(database, service, timedelta(minutes=5))
    clock.now = utcnow()
    with pytest.raises(UnauthorizedUserError, match="expired"):
        verify(database, service, expired)
    issue(database, service, timedelta(minutes=5))  # issuing purges expired records
    with database.session() as session:
        assert identity.find_token(session, token_hash(expired)) is None


def test_a_token_that_expires_after_its_first_use_is_refused_then(database: Database) -> None:
    """Checked signatures are remembered; the expiry must still be checked on each use."""
    clock = Clock()
    service = TokenService(KEY, clock=clock)
    clock.now = utcnow() - timedelta(minutes=5) + timedelta(seconds=2)
    token = issue(database, service, timedelta(minutes=5))  # expires 1 to 2 s from now
    assert verify(database, service, token) == "admin"
    time.sleep(2.1)
    with pytest.raises(UnauthorizedUserError, match="expired"):
        verify(database, service, token)


def test_signatures_from_other_keys_and_garbage_are_refused(database: Database) -> None:
    token = issue(database, TokenService(KEY), timedelta(hours=1))
    with pytest.raises(UnauthorizedUserError, match="not valid"):
        verify(database, TokenService(b"x" * 32), token)
    with pytest.raises(UnauthorizedUserError, match="not valid"):
        verify(database, TokenService(KEY), "garbage")


def test_a_token_is_revoked_only_by_its_owner(database: Database) -> None:
    service = TokenService(KEY)
    token = issue(database, service, None)
    with database.session() as session:
        intruder = Directory(session).create_user("mallory", "mallory-pw")
        with pytest.raises(ForbiddenUserError):
            service.revoke(session, intruder, token)
    assert verify(database, service, token) == "admin"


def test_live_tokens_are_listed_newest_first_without_expired_ones(database: Database) -> None:
    clock = Clock()
    service = TokenService(KEY, clock=clock)
    old = issue(database, service, timedelta(minutes=1))
    clock.now += timedelta(seconds=10)
    application = issue(database, service, None)
    clock.now += timedelta(minutes=2)  # the first has expired by now
    with database.session() as session:
        admin = identity.find_user(session, "admin")
        assert admin is not None
        listed = [record.token_hash for record in service.live_tokens(session, admin)]
    assert listed == [token_hash(application)]
    assert token_hash(old) not in listed
