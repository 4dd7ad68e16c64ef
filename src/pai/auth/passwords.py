"""Password hashing with Argon2id.

Parameters follow OWASP's password-storage recommendation for Argon2id (19 MiB, 2 passes, one
lane): strong against GPU cracking, yet a login costs tens of milliseconds and little memory on
a control plane that serves the API from one process. Hashes made with other parameters are
upgraded on the next successful login (`needs_rehash`).
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    """A salted Argon2id hash in PHC string format; the password itself is never stored."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Whether `password` matches `password_hash` (constant-time comparison inside argon2)."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with weaker parameters than today's; rehash on next login."""
    return _hasher.check_needs_rehash(password_hash)
