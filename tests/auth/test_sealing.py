"""Job secrets are stored encrypted and only the cluster key opens them."""

import pytest

from pai.auth.sealing import SealError, SecretBox


def test_sealed_secrets_open_with_the_same_key_only() -> None:
    box = SecretBox(b"k" * 40)
    sealed = box.seal({"wandb_key": "s3cr3t-value", "n": 3})
    assert "s3cr3t-value" not in sealed
    assert box.open(sealed) == {"wandb_key": "s3cr3t-value", "n": 3}
    with pytest.raises(SealError, match="cluster secret key"):
        SecretBox(b"x" * 40).open(sealed)


def test_sealing_twice_gives_different_ciphertexts() -> None:
    box = SecretBox(b"k" * 40)
    assert box.seal({"a": "b"}) != box.seal({"a": "b"})
