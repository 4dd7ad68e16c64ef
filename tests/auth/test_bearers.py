"""Who bears a token is remembered while no change to users, groups or tokens commits: here
it is forgotten as soon as such a change commits, so a revoked token or a withdrawn VC never
outlives its change; other processes see the change within the cache's `ttl`, when they next
read the identity epoch that the store's triggers raise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import event

from fake_clock import FakeClock
from pai.auth.bearer import authenticate_token
from pai.auth.bearers import BearerCache
from pai.auth.bootstrap import initialize
from pai.auth.directory import Directory
from pai.auth.tokens import TokenService
from pai.errors import UnauthorizedUserError
from pai.settings import Settings
from pai.store import Database, identity

KEY = b"k" * 32


@pytest.fixture
def tokens() -> TokenService:
    return TokenService(KEY)


def issue(database: Database, tokens: TokenService, username: str) -> str:
    with database.session() as session:
        return tokens.issue(session, Directory(session).user(username), lifetime=None).token


def reads_of(database: Database) -> list[str]:
    """The SQL statements `database` runs from now on."""
    statements: list[str] = []
    event.listen(
        database.engine,
        "before_cursor_execute",
        lambda _connection, _cursor, sql, *_: statements.append(sql),
    )
    return statements


def test_a_bearer_is_read_once_and_then_only_the_epoch_now_and_then(
    database: Database, tokens: TokenService
) -> None:
    clock = FakeClock()
    bearers = BearerCache(ttl=2.0, clock=clock)
    bearers.watch(database)
    token = issue(database, tokens, "admin")
    statements = reads_of(database)
    for _ in range(3):
        assert authenticate_token(database, tokens, bearers, token).username == "admin"
    clock.now += 2.5  # the epoch is due: read it; it has not moved, so the bearer still holds
    authenticate_token(database, tokens, bearers, token)
    assert len([sql for sql in statements if "FROM tokens" in sql]) == 1
    assert len([sql for sql in statements if "FROM identity_epoch" in sql]) == 2


def test_a_change_committed_by_another_process_is_seen_within_the_ttl(
    pai_database_url: str, tokens: TokenService, tmp_path: Path
) -> None:
    """Another API worker (its own Database and cache) withdraws alice's VC: this worker's
    remembered bearer holds until its epoch is due, then the change is seen (on each backend,
    whose triggers raise the epoch)."""
    database = Database(pai_database_url)
    initialize(database, Settings(home=tmp_path, database_url=pai_database_url))
    clock = FakeClock()
    bearers = BearerCache(ttl=2.0, clock=clock)
    bearers.watch(database)
    token = alice_of_vision(database, tokens)
    assert authenticate_token(database, tokens, bearers, token).may_use_virtual_cluster("vc_vision")
    elsewhere = Database(pai_database_url)
    try:
        change_in_a_transaction(
            elsewhere, lambda directory: directory.update_user("alice", virtual_clusters=[])
        )
        assert authenticate_token(database, tokens, bearers, token).may_use_virtual_cluster(
            "vc_vision"
        )
        clock.now += 2.5
        assert not authenticate_token(database, tokens, bearers, token).may_use_virtual_cluster(
            "vc_vision"
        )
    finally:
        elsewhere.dispose()
        database.dispose()


def alice_of_vision(database: Database, tokens: TokenService) -> str:
    """A token of the new user alice, whose group `vision` grants the VC `vc_vision`."""
    with database.session() as session:
        directory = Directory(session)
        directory.create_group("vision", virtual_clusters=["vc_vision"])
        directory.create_user("alice", "alice-pw", virtual_clusters=["vc_vision"])
    return issue(database, tokens, "alice")


def change_in_a_transaction(database: Database, change: Callable[[Directory], object]) -> None:
    with database.session() as session:
        change(Directory(session))


@pytest.mark.parametrize(
    "change, refused",
    [
        pytest.param(
            lambda directory: directory.update_user("alice", virtual_clusters=[]),
            None,
            id="a VC withdrawn",
        ),
        pytest.param(
            lambda directory: directory.delete_user("alice"), "revoked", id="the user removed"
        ),
    ],
)
def test_a_committed_change_is_seen_by_the_next_request(
    database: Database, tokens: TokenService, change: Callable[[Directory], object], refused: str
) -> None:
    bearers = BearerCache(ttl=3600.0)
    bearers.watch(database)
    token = alice_of_vision(database, tokens)
    before = authenticate_token(database, tokens, bearers, token)
    assert before.may_use_virtual_cluster("vc_vision")
    change_in_a_transaction(database, change)
    if refused is None:
        after = authenticate_token(database, tokens, bearers, token)
        assert not after.may_use_virtual_cluster("vc_vision")
    else:
        with pytest.raises(UnauthorizedUserError, match=refused):
            authenticate_token(database, tokens, bearers, token)


def test_a_revoked_token_is_refused_at_once(database: Database, tokens: TokenService) -> None:
    bearers = BearerCache(ttl=3600.0)
    bearers.watch(database)
    token = issue(database, tokens, "admin")
    authenticate_token(database, tokens, bearers, token)
    with database.session() as session:
        tokens.revoke(session, Directory(session).user("admin"), token)
    with pytest.raises(UnauthorizedUserError, match="revoked"):
        authenticate_token(database, tokens, bearers, token)


def test_a_change_committed_while_a_bearer_was_read_is_not_hidden_by_it(
    database: Database, tokens: TokenService
) -> None:
    """A bearer read before a change committed may predate it: it is used once, not kept."""
    bearers = BearerCache(ttl=3600.0)
    bearers.watch(database)
    token = issue(database, tokens, "admin")
    generation = bearers.generation()
    with database.reading() as session:
        stale = identity.find_token_bearer(session, tokens.decode(token).token_hash)
    assert stale is not None
    change_in_a_transaction(
        database, lambda directory: directory.create_user("bob", "bob-pw", admin=True)
    )
    bearers.remember(tokens.decode(token).token_hash, stale, generation)
    assert bearers.get(tokens.decode(token).token_hash) is None


def test_an_unrelated_write_keeps_what_is_remembered(
    database: Database, tokens: TokenService
) -> None:
    bearers = BearerCache(ttl=3600.0)
    bearers.watch(database)
    token = issue(database, tokens, "admin")
    authenticate_token(database, tokens, bearers, token)
    with database.session() as session:  # a token's last use is written once a minute
        identity.record_token_use(
            session, tokens.decode(token).token_hash, tokens.decode(token).issued_at
        )
    assert bearers.get(tokens.decode(token).token_hash) is not None
