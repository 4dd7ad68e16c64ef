"""The token signing key: from the environment, or generated once and kept private."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pai.auth.secret import load_secret_key
from pai.errors import ConfigurationError
from pai.settings import Settings, default_database_url


def settings(home: Path, secret_key: str | None = None) -> Settings:
    return Settings(home=home, database_url=default_database_url(home), secret_key=secret_key)


def test_a_generated_key_is_kept_private_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = load_secret_key(settings(home))
    path = home / "secret.key"
    assert len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret_key(settings(home)) == key
    assert [entry.name for entry in home.iterdir()] == ["secret.key"]


def test_the_environment_key_wins_and_nothing_is_written(tmp_path: Path) -> None:
    key = "k" * 40
    assert load_secret_key(settings(tmp_path, secret_key=key)) == key.encode()
    assert not (tmp_path / "secret.key").exists()


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    keys: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: keys.append(load_secret_key(settings(tmp_path))))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8
    assert len(set(keys)) == 1


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    load_secret_key(settings(tmp_path))
    os.chmod(tmp_path / "secret.key", 0o644)
    with pytest.raises(ConfigurationError, match=r"readable by other users.*chmod 600"):
        load_secret_key(settings(tmp_path))


def test_a_short_environment_key_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="PAI_SECRET_KEY: must be at least 32"):
        settings(Path("/nonexistent"), secret_key="short")
