"""Job names: `job` is the logged-in user's, `user~job` anyone's."""

from __future__ import annotations

import pytest

from pai.sdk import Client, InvalidArgumentError, NotFoundError
from pai.sdk.names import framework_name, segment
from server.harness import Account, RunningServer


@pytest.mark.parametrize(
    ("name", "user", "full"),
    [
        ("train", "alice", "alice~train"),
        ("bob~train", "alice", "bob~train"),
        ("bob~train", None, "bob~train"),
    ],
)
def test_names_resolve_to_framework_names(name: str, user: str | None, full: str) -> None:
    assert framework_name(name, user) == full


@pytest.mark.parametrize("name", ["", "~train", "alice~", "a~b~c"])
def test_malformed_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="is not 'job' or 'user~job'"):
        framework_name(name, "alice")


def test_a_bare_name_needs_a_logged_in_user() -> None:
    with pytest.raises(InvalidArgumentError, match="not logged in"):
        framework_name("train", None)


def test_path_segments_cannot_escape() -> None:
    assert segment("a/../b c") == "a%2F..%2Fb%20c"
    assert segment("alice~job") == "alice~job"


def test_a_client_with_only_a_token_learns_its_user(
    pai_server: RunningServer, alice: Account
) -> None:
    with Client(pai_server.base_url, alice.token) as client:
        assert client.username == alice.username
        with pytest.raises(NotFoundError) as caught:
            client.job("no-such-job")

    assert f"{alice.username}~no-such-job" in caught.value.message


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_segment_that_would_name_another_path_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        segment(name)

    assert str(refused.value) == f"{name!r} is not a name: a name cannot be empty, '.' or '..'"
