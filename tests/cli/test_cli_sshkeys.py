"""`pai sshkey`: the public keys in your profile, as a user runs it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import asyncssh
import pytest
from pai_runner import Pai

from server.harness import RunningServer


@pytest.fixture
def admin_pai(pai: Pai, jobs_server: RunningServer) -> Pai:
    """`pai` logged in as the administrator of the whole platform (which serves the keys)."""
    pai.login(jobs_server, jobs_server.admin.username, jobs_server.admin.password)
    return pai


def test_a_key_is_added_listed_as_json_and_removed(admin_pai: Pai, tmp_path: Path) -> None:
    public_key = tmp_path / "id_ed25519.pub"
    public_key.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_public_key())
    title = f"laptop-{uuid.uuid4().hex[:8]}"

    added = admin_pai.run("sshkey", "add", title, str(public_key))
    listed = admin_pai.run("sshkey", "list", "--json")
    removed = admin_pai.run("sshkey", "remove", title)
    after = admin_pai.run("sshkey", "list", "--json")

    assert [r.returncode for r in (added, listed, removed, after)] == [0, 0, 0, 0], listed.stderr
    (entry,) = [key for key in json.loads(listed.stdout) if key["title"] == title]
    assert entry["fingerprint"].startswith("SHA256:")
    assert added.stdout == f"added SSH key '{title}' ({entry['fingerprint']})\n"
    assert title not in [key["title"] for key in json.loads(after.stdout)]
