"""Password hashing."""

from __future__ import annotations

from argon2 import PasswordHasher

from pai.auth.passwords import hash_password, needs_rehash, verify_password


def test_a_hash_verifies_its_password_only() -> None:
    hashed = hash_password("correct horse")
    assert hashed.startswith("$argon2id$")
    assert "correct horse" not in hashed
    assert verify_password(hashed, "correct horse")
    assert not verify_password(hashed, "correct horse ")
    assert not verify_password("not a hash", "correct horse")


def test_hashes_are_salted() -> None:
    assert hash_password("same") != hash_password("same")


def test_hashes_made_with_other_parameters_ask_to_be_redone() -> None:
    assert not needs_rehash(hash_password("pw"))
    assert needs_rehash(PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash("pw"))
