"""The SSH keys of an ssh-enabled job, and the checking of the public keys users give.

A job has two Ed25519 key pairs. With the *job key* its tasks log in to each other (OpenPAI's
`jobssh`); the *host key* is what every task's SSH server presents, so a client can check it
talks to the platform's server. Both are derived from the cluster secret and the job's id, so a
restart or a retry gets the same keys while nothing is stored: the private halves exist only in
the scripts of the job's tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncssh
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

MAX_PUBLIC_KEY_LENGTH = 16384


class PublicKeyError(ValueError):
    """Text given as an SSH public key is not one."""


@dataclass(frozen=True)
class KeyPair:
    private: str  # OpenSSH private key format
    public: str  # one authorized_keys line


@dataclass(frozen=True)
class JobSshKeys:
    job: KeyPair
    host: KeyPair


def job_ssh_keys(derive: Callable[[bytes], bytes], job_id: int) -> JobSshKeys:
    """The job's keys; `derive(purpose)` gives 32 secret bytes per purpose (`SecretBox.derive`)."""
    return JobSshKeys(
        job=_key_pair(derive(f"pai job ssh key v1 {job_id}".encode()), f"pai-job-{job_id}"),
        host=_key_pair(derive(f"pai job host key v1 {job_id}".encode()), f"pai-host-{job_id}"),
    )


def _key_pair(seed: bytes, comment: str) -> KeyPair:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    private = key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return KeyPair(private, f"{public} {comment}")


def check_public_key(text: str, where: str) -> str:
    """`text` as one authorized_keys line (type, key, comment); PublicKeyError names `where`."""
    text = text.strip()
    if not text or len(text) > MAX_PUBLIC_KEY_LENGTH or "\n" in text:
        raise PublicKeyError(f"{where}: expected one SSH public key on one line")
    try:
        asyncssh.import_public_key(text)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise PublicKeyError(f"{where}: not an SSH public key ({exc})") from None
    return text


def fingerprint(public_key: str) -> str:
    """SHA256 fingerprint, as `ssh-keygen -l` prints it."""
    return str(asyncssh.import_public_key(public_key).get_fingerprint("sha256"))
