"""Rate limits: the limiter itself (with a hand-driven clock) and 429 from a real server."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pai.errors import TooManyRequestsError
from pai.server.ratelimit import PRUNE_THRESHOLD, RateLimiter
from server.harness import StartServer, server_settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_allows_the_limit_then_says_when_to_retry() -> None:
    clock = Clock()
    limiter = RateLimiter(3, 60, what="login attempts", clock=clock)
    for step in range(3):
        clock.now += 10 * step
        limiter.acquire("10.0.0.1")
    with pytest.raises(TooManyRequestsError) as refused:
        limiter.acquire("10.0.0.1")
    # Events at 1000, 1010 and 1030; the first leaves the window at 1060, 30 s from now.
    assert refused.value.retry_after == pytest.approx(30)
    assert refused.value.headers == {"Retry-After": "30"}
    assert refused.value.message == (
        "too many login attempts for 10.0.0.1 (at most 3 per minute); try again in 30 s"
    )


def test_the_window_slides_and_refusals_do_not_count() -> None:
    clock = Clock()
    limiter = RateLimiter(2, 3600, what="job submissions", clock=clock)
    limiter.acquire("alice")
    clock.now += 1800
    limiter.acquire("alice")
    for _ in range(5):
        with pytest.raises(TooManyRequestsError):
            limiter.acquire("alice")
    clock.now += 1800  # the first event has left the window, the second has not
    limiter.acquire("alice")
    with pytest.raises(TooManyRequestsError) as refused:
        limiter.acquire("alice")
    assert refused.value.retry_after == pytest.approx(1800)


def test_keys_are_limited_independently() -> None:
    limiter = RateLimiter(1, 60, what="job submissions", clock=Clock())
    limiter.acquire("alice")
    limiter.acquire("bob")
    with pytest.raises(TooManyRequestsError):
        limiter.acquire("alice")


def test_never_more_than_the_limit_in_any_window_under_concurrency() -> None:
    limiter = RateLimiter(50, 3600, what="job submissions", clock=Clock())
    granted = []

    def hammer() -> None:
        for _ in range(40):
            try:
                limiter.acquire("alice")
                granted.append(1)
            except TooManyRequestsError:
                pass

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 50


def test_idle_keys_are_forgotten() -> None:
    clock = Clock()
    limiter = RateLimiter(1, 60, what="login attempts", clock=clock)
    for index in range(PRUNE_THRESHOLD):
        limiter.acquire(f"10.0.{index // 256}.{index % 256}")
    clock.now += 61
    limiter.acquire("one more")  # crosses the threshold: everything idle is pruned
    assert limiter._events.keys() == {"one more"}


def test_a_limiter_needs_a_positive_limit_and_period() -> None:
    with pytest.raises(ValueError, match="limit >= 1"):
        RateLimiter(0, 60, what="x")


def test_login_attempts_beyond_the_limit_get_429(
    start_pai_server: StartServer, pai_database_url: str, tmp_path: Path
) -> None:
    server = start_pai_server(
        server_settings(tmp_path / "home", pai_database_url, login_rate_limit=3)
    )
    wrong = {"username": "admin", "password": "wrong-password"}
    with server.client() as client:
        statuses = [client.post("/authn/basic/login", json=wrong).status_code for _ in range(3)]
        limited = client.post(
            "/authn/basic/login",
            json={"username": "admin", "password": server.admin.password},
        )
    assert statuses == [400, 400, 400]
    assert limited.status_code == 429
    assert limited.json()["code"] == "TooManyRequestsError"
    assert (
        "too many login attempts for 127.0.0.1 (at most 3 per minute)" in limited.json()["message"]
    )
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
