"""The cluster secret that signs tokens: from `PAI_SECRET_KEY`, or generated once on disk."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from pai.errors import ConfigurationError
from pai.settings import Settings

SECRET_FILE_NAME = "secret.key"


def load_secret_key(settings: Settings) -> bytes:
    """The signing key: `settings.secret_key` if set, else `$PAI_HOME/secret.key`.

    The file is created on first use with mode 600 and never written to the database, so a
    copy of the database alone cannot forge tokens. Several API replicas must share
    `PAI_SECRET_KEY`.
    """
    if settings.secret_key is not None:
        return settings.secret_key.encode()
    path = settings.home / SECRET_FILE_NAME
    if not path.exists():
        _create_secret_file(path)
    return _read_secret_file(path)


def _create_secret_file(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(staging, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
        # A hard link never replaces an existing file: if another process won the race,
        # both go on with its key.
        with contextlib.suppress(FileExistsError):
            os.link(staging, path)
    finally:
        staging.unlink()


def _read_secret_file(path: Path) -> bytes:
    mode = path.stat().st_mode
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(
            f"{path}: the token signing key is readable by other users "
            f"(mode {stat.filemode(mode)}); run `chmod 600 {path}`"
        )
    key = path.read_text().strip()
    if len(key) < 32:
        raise ConfigurationError(
            f"{path}: the token signing key is too short; delete the file to regenerate it"
        )
    return key.encode()
