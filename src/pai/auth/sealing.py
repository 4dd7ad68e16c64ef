"""Encryption of job secrets at rest, with a key derived from the cluster secret.

A job's `secrets` must survive restarts and retries (each launch substitutes them into the
task's script), but must never sit in the database in clear: a copy of the database alone
reveals nothing without the cluster key, which lives outside it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_PURPOSE = b"pai job secrets v1"


class SealError(Exception):
    """Sealed data cannot be opened: the cluster key changed or the data was altered."""


class SecretBox:
    """Seals and opens JSON-serialisable mappings (authenticated encryption, Fernet)."""

    def __init__(self, cluster_key: bytes) -> None:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(
            cluster_key
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))
        self._cluster_key = cluster_key

    def derive(self, purpose: bytes) -> bytes:
        """32 bytes only this cluster key gives for `purpose`: material for keys that must be
        the same after a restart (a job's SSH keys) without being stored anywhere."""
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(
            self._cluster_key
        )

    def seal(self, values: Mapping[str, Any]) -> str:
        return self._fernet.encrypt(json.dumps(dict(values)).encode()).decode()

    def open(self, sealed: str) -> dict[str, Any]:
        try:
            opened: dict[str, Any] = json.loads(self._fernet.decrypt(sealed.encode()))
        except InvalidToken:
            raise SealError(
                "job secrets cannot be decrypted: the cluster secret key (PAI_SECRET_KEY or "
                "$PAI_HOME/secret.key) differs from the one they were sealed with"
            ) from None
        return opened
