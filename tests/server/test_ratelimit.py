"""Rate limits: the database-backed limiter (with a hand-driven clock, on each backend) and
what users see from a real server: 429 for guesses at one account, nobody else locked out."""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path

import pytest

from fake_clock import FakeClock
from pai.errors import TooManyRequestsError
from pai.server.ratelimit import StoredRateLimiter
from pai.store import Database
from server.harness import StartServer, server_settings


def acquire(database: Database, limiter: StoredRateLimiter, key: str) -> None:
    with database.session() as session:
        limiter.acquire(session, key)


def test_allows_the_limit_then_says_when_to_retry(database: Database) -> None:
    clock = FakeClock(7200.0)  # the start of a minute and of an hour
    limiter = StoredRateLimiter("test", 3, 60, what="job submissions", clock=clock)
    for _ in range(3):
        clock.now += 10
        acquire(database, limiter, "alice")
    with pytest.raises(TooManyRequestsError) as refused:
        acquire(database, limiter, "alice")
    # The minute's window is full: the next one starts in 30 s, and the events of this one
    # weigh less and less in it until a fourth fits, a third of the way in (20 s).
    assert refused.value.retry_after == pytest.approx(50)
    assert refused.value.headers == {"Retry-After": "50"}
    assert refused.value.message == (
        "too many job submissions for alice (at most 3 per minute); try again in 50 s"
    )


def test_the_window_slides_and_refusals_do_not_count(database: Database) -> None:
    clock = FakeClock(7200.0)  # the start of a minute and of an hour
    limiter = StoredRateLimiter("test", 2, 3600, what="job submissions", clock=clock)
    acquire(database, limiter, "alice")
    acquire(database, limiter, "alice")
    for _ in range(5):
        with pytest.raises(TooManyRequestsError):
            acquire(database, limiter, "alice")
    clock.now += 3600  # the next window: the last one's two events weigh fully at its start
    with pytest.raises(TooManyRequestsError) as refused:
        acquire(database, limiter, "alice")
    assert refused.value.retry_after == pytest.approx(1800)  # when they weigh one half
    clock.now += 1800
    acquire(database, limiter, "alice")
    with pytest.raises(TooManyRequestsError):
        acquire(database, limiter, "alice")


def test_keys_are_limited_independently(database: Database) -> None:
    limiter = StoredRateLimiter("test", 1, 60, what="job submissions", clock=FakeClock(7200.0))
    acquire(database, limiter, "alice")
    acquire(database, limiter, "bob")
    with pytest.raises(TooManyRequestsError):
        acquire(database, limiter, "alice")


def test_workers_sharing_a_database_share_the_limit(pai_database_url: str) -> None:
    """Two API workers are two processes with a database each: never more than the limit."""
    workers = [Database(pai_database_url) for _ in range(2)]
    with workers[0].exclusive() as connection:
        workers[0].upgrade(connection)
    limiters = [StoredRateLimiter("test", 50, 3600, what="job submissions") for _ in workers]
    granted = []

    def hammer(worker: int) -> None:
        for _ in range(40):
            try:
                acquire(workers[worker], limiters[worker], "alice")
                granted.append(1)
            except TooManyRequestsError:
                pass

    threads = [threading.Thread(target=hammer, args=(index % 2,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        worker.dispose()
    assert len(granted) == 50


def test_a_limiter_needs_a_positive_limit_and_period() -> None:
    with pytest.raises(ValueError, match="limit >= 1"):
        StoredRateLimiter("test", 0, 60, what="x")


def test_failed_guesses_at_one_account_lock_out_only_that_account(
    start_pai_server: StartServer, pai_database_url: str, tmp_path: Path
) -> None:
    """Behind one proxy or NAT every user has the same address: guesses at the administrator's
    account must not keep the others out, and a successful login never counts."""
    server = start_pai_server(
        server_settings(tmp_path / "home", pai_database_url, login_rate_limit=3)
    )
    admin_token = server.login(server.admin.username, server.admin.password)
    with server.client(admin_token) as client:
        client.post(
            "/users", json={"username": "carol", "password": "carol-password", "admin": False}
        ).raise_for_status()
    wrong = {"username": "admin", "password": "wrong-password"}
    with server.client() as client:
        carol = {"username": "carol", "password": "carol-password"}
        successes = [client.post("/authn/basic/login", json=carol).status_code for _ in range(5)]
        guesses = [client.post("/authn/basic/login", json=wrong).status_code for _ in range(3)]
        limited = client.post(
            "/authn/basic/login",
            json={"username": "admin", "password": server.admin.password},
        )
        carol_after = client.post("/authn/basic/login", json=carol)
    assert successes == [200] * 5
    assert guesses == [400, 400, 400]
    assert limited.status_code == 429
    assert limited.json()["code"] == "TooManyRequestsError"
    assert (
        "too many failed logins for admin from 127.0.0.1 (at most 3 per minute)"
        in limited.json()["message"]
    )
    assert 1 <= int(limited.headers["Retry-After"]) <= 120
    assert carol_after.status_code == 200


def test_the_client_address_comes_from_trusted_proxies_only(
    start_pai_server: StartServer, pai_database_url: str, tmp_path: Path
) -> None:
    """The server trusts 127.0.0.1 as its proxy: the address that proxy forwards is the one
    counted; an address the client itself wrote further left is not."""
    server = start_pai_server(
        server_settings(
            tmp_path / "home",
            pai_database_url,
            login_rate_limit=2,
            trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),),
        )
    )
    wrong = {"username": "admin", "password": "wrong-password"}

    def attempt(forwarded_for: str) -> int:
        with server.client() as client:
            answer = client.post(
                "/authn/basic/login", json=wrong, headers={"X-Forwarded-For": forwarded_for}
            )
            return answer.status_code

    assert [attempt("1.2.3.4, 10.9.0.1") for _ in range(3)] == [400, 400, 429]
    # Another client behind the proxy, even one forging the first client's address to the left.
    assert attempt("10.9.0.1, 10.9.0.2") == 400
    answer_for_first = attempt("10.9.0.1")
    assert answer_for_first == 429
