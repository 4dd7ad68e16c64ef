"""The client configuration: where it lives, who may read it, and which token goes where."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pai.sdk import Client, ClientConfig, ConfigError, Credentials, load_config, save_config
from pai.sdk.config import config_path, normalize_server
from server.harness import Account, RunningServer


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_is_pai_config_or_the_home_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PAI_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path() == tmp_path / ".pai" / "config"

    monkeypatch.setenv("PAI_CONFIG", str(tmp_path / "elsewhere.json"))
    assert config_path() == tmp_path / "elsewhere.json"


@pytest.mark.parametrize(
    ("typed", "url"),
    [
        ("127.0.0.1:9186", "http://127.0.0.1:9186"),
        ("http://127.0.0.1:9186/", "http://127.0.0.1:9186"),
        ("https://pai.example.org/api/v2", "https://pai.example.org"),
        ("https://example.org/rest-server/api/v2/", "https://example.org/rest-server"),
    ],
)
def test_server_urls_are_normalized(typed: str, url: str) -> None:
    assert normalize_server(typed) == url


def test_a_server_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ConfigError, match="ftp://host"):
        normalize_server("ftp://host")


def test_only_the_owner_can_read_the_saved_tokens(tmp_path: Path) -> None:
    path = tmp_path / "new-directory" / "config"
    config = ClientConfig().with_login("127.0.0.1:1", Credentials("alice", "secret-token"))

    save_config(config, path)

    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert os.listdir(path.parent) == ["config"]  # no temporary file left behind
    assert load_config(path) == config


def test_each_server_keeps_its_own_token(tmp_path: Path) -> None:
    path = tmp_path / "config"
    first = ClientConfig().with_login("http://a:1", Credentials("alice", "token-a"))
    both = first.with_login("http://b:2/", Credentials("bob", "token-b"))
    save_config(both, path)

    loaded = load_config(path)

    assert loaded.server == "http://b:2"
    assert loaded.credentials("a:1") == Credentials("alice", "token-a")
    assert loaded.credentials("http://b:2") == Credentials("bob", "token-b")
    assert loaded.without("http://b:2").credentials("http://b:2") is None


def test_a_missing_file_is_an_empty_configuration(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent") == ClientConfig()


def test_a_damaged_file_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("{not json")

    with pytest.raises(ConfigError, match=str(path)):
        load_config(path)


def test_tokens_never_appear_in_reprs() -> None:
    credentials = Credentials("alice", "secret-token")

    assert "secret-token" not in repr(credentials)
    assert "secret-token" not in repr(Client("http://127.0.0.1:1", "secret-token"))


def test_from_config_uses_the_saved_login(
    pai_server: RunningServer, alice: Account, tmp_path: Path
) -> None:
    path = tmp_path / "config"
    with Client.login(pai_server.base_url, alice.username, alice.password) as client:
        assert client.token is not None
        save_config(
            ClientConfig().with_login(client.server, Credentials(alice.username, client.token)),
            path,
        )

    with Client.from_config(path) as client:
        assert client.whoami().username == alice.username


def test_a_token_is_not_sent_to_another_server(
    pai_server: RunningServer, alice: Account, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config"
    save_config(
        ClientConfig().with_login(pai_server.base_url, Credentials(alice.username, alice.token)),
        path,
    )
    monkeypatch.setenv("PAI_SERVER", "http://127.0.0.2:9")

    with Client.from_config(path) as client:
        assert client.server == "http://127.0.0.2:9"
        assert client.token is None


def test_without_any_server_from_config_says_how_to_log_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAI_SERVER", raising=False)

    with pytest.raises(ConfigError, match="pai login --server URL"):
        Client.from_config(tmp_path / "config")
