"""A user's SSH public keys, kept where OpenPAI keeps them: `extension.sshKeys` of the user, a
list of `{title, value, time}` (the portal of OpenPAI writes the same shape)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.store.models import User

SSH_KEYS = "sshKeys"


def ssh_keys_of(session: Session, username: str) -> list[dict[str, Any]]:
    """The user's keys, oldest first; none for a user that does not exist."""
    extension = session.scalar(select(User.extension).where(User.username == username))
    keys = (extension or {}).get(SSH_KEYS) or []
    return [key for key in keys if isinstance(key, dict) and isinstance(key.get("value"), str)]


def add_ssh_key(session: Session, user: User, title: str, value: str) -> dict[str, Any]:
    key = {"title": title, "value": value, "time": int(time.time() * 1000)}
    user.extension = {**user.extension, SSH_KEYS: [*ssh_keys_of(session, user.username), key]}
    return key


def remove_ssh_key(session: Session, user: User, title: str) -> bool:
    """False if the user has no key of that title."""
    keys = ssh_keys_of(session, user.username)
    kept = [key for key in keys if key.get("title") != title]
    user.extension = {**user.extension, SSH_KEYS: kept}
    return len(kept) < len(keys)
