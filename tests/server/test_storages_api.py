"""Storages through the REST API of the whole platform: a group grants a storage to its
members, who list, read and write its files; others are refused; bad paths, oversized
uploads and bad definitions are refused without leaving anything behind; every change is in
the audit log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.harness import Account, RunningServer
from server.storagehelpers import define_storage, new_group, unique_storage

UPLOADS_FOLDER = ".pai-uploads"


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    return pai_platform


@pytest.fixture(scope="module")
def team(
    pai_server: RunningServer, alice: Account, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    """A directory storage granted to alice (and not to bob) through a group."""
    root = tmp_path_factory.mktemp("team-storage")
    name = unique_storage()
    define_storage(pai_server, name, "directory", {"path": str(root)}, description="team data")
    new_group(pai_server, [name], [alice.username])
    return name, root


def everything_under(root: Path) -> set[str]:
    """Every file and folder under `root`, hidden ones included, relative to it."""
    found = set()
    for folder, folders, files in os.walk(root):
        for entry in [*folders, *files]:
            found.add(os.path.relpath(os.path.join(folder, entry), root))
    return found


def test_members_of_the_granting_group_see_the_storage_with_openpai_fields(
    pai_server: RunningServer, team: tuple[str, Path], alice: Account, bob: Account
) -> None:
    name, root = team
    with pai_server.client(alice.token) as client:
        listed = client.get("/storages").json()["storages"]
        detail = client.get(f"/storages/{name}")
    mine = [storage for storage in listed if storage["name"] == name]
    assert len(mine) == 1
    assert mine[0]["share"] is True and mine[0]["volumeName"] == name
    assert mine[0]["quota"]["limitBytes"] > mine[0]["quota"]["usedBytes"] > 0
    assert detail.status_code == 200
    body = detail.json()
    assert (body["type"], body["data"], body["readOnly"]) == (
        "directory",
        {"path": str(root)},
        False,
    )
    assert body["createdBy"] == "admin" and body["description"] == "team data"

    with pai_server.client(bob.token) as client:
        assert name not in [
            storage["name"] for storage in client.get("/storages").json()["storages"]
        ]
        refused = client.get(f"/storages/{name}")
    assert refused.status_code == 403
    assert refused.json()["code"] == "ForbiddenUserError"
    assert "none of the user's groups grants it" in refused.json()["message"]


def test_an_unknown_storage_is_404_no_storage_error(
    pai_server: RunningServer, alice: Account
) -> None:
    with pai_server.client(alice.token) as client:
        for response in (
            client.get("/storages/no-such-storage"),
            client.get("/storages/no-such-storage/files"),
            client.put("/storages/no-such-storage/content", params={"path": "a"}, content=b"x"),
        ):
            assert response.status_code == 404, response.text
            assert response.json()["code"] == "NoStorageError"


def test_a_member_writes_lists_reads_and_removes_files(
    pai_server: RunningServer, team: tuple[str, Path], alice: Account
) -> None:
    name, root = team
    with pai_server.client(alice.token) as client:
        written = client.put(
            f"/storages/{name}/content", params={"path": "/runs/1/result.txt"}, content=b"42\n"
        )
        assert written.status_code == 200, written.text
        assert written.json() == {"storage": name, "path": "/runs/1/result.txt", "size": 3}
        assert (root / "runs" / "1" / "result.txt").read_bytes() == b"42\n"

        listing = client.get(f"/storages/{name}/files", params={"path": "runs/1"}).json()
        assert listing["type"] == "directory"
        assert [(e["name"], e["type"], e["size"]) for e in listing["entries"]] == [
            ("result.txt", "file", 3)
        ]
        downloaded = client.get(f"/storages/{name}/content", params={"path": "runs/1/result.txt"})
        assert downloaded.content == b"42\n"
        assert "result.txt" in downloaded.headers["content-disposition"]

        folder = client.post(f"/storages/{name}/folders", params={"path": "empty"})
        assert folder.status_code == 201
        assert (root / "empty").is_dir()

        kept = client.delete(f"/storages/{name}/files", params={"path": "runs"})
        assert kept.status_code == 400 and "recursive" in kept.json()["message"]
        removed = client.delete(
            f"/storages/{name}/files", params={"path": "runs", "recursive": "true"}
        )
        assert removed.json()["removedFiles"] == 1
    assert not (root / "runs").exists()


def test_a_user_outside_the_group_is_refused_on_every_file_endpoint(
    pai_server: RunningServer, team: tuple[str, Path], bob: Account
) -> None:
    name, root = team
    (root / "secret.txt").write_text("team only")
    with pai_server.client(bob.token) as client:
        responses = [
            client.get(f"/storages/{name}/files"),
            client.get(f"/storages/{name}/content", params={"path": "secret.txt"}),
            client.put(f"/storages/{name}/content", params={"path": "bob.txt"}, content=b"x"),
            client.post(f"/storages/{name}/folders", params={"path": "bob"}),
            client.delete(f"/storages/{name}/files", params={"path": "secret.txt"}),
            client.post(f"/storages/{name}/uploads", json={"path": "big.bin", "size": 10}),
            client.get(f"/storages/{name}/uploads"),
        ]
    assert [response.status_code for response in responses] == [403] * len(responses)
    assert {response.json()["code"] for response in responses} == {"ForbiddenUserError"}
    assert (root / "secret.txt").read_text() == "team only"
    assert not (root / "bob.txt").exists() and not (root / "bob").exists()


@pytest.mark.parametrize(
    "path", ["../outside.txt", "a/../../outside.txt", "./x", "runs/./x", ".pai-uploads/x"]
)
def test_paths_that_could_leave_the_storage_are_refused(
    pai_server: RunningServer, team: tuple[str, Path], alice: Account, path: str
) -> None:
    name, root = team
    before = everything_under(root.parent)
    with pai_server.client(alice.token) as client:
        for response in (
            client.put(f"/storages/{name}/content", params={"path": path}, content=b"x"),
            client.get(f"/storages/{name}/content", params={"path": path}),
            client.delete(f"/storages/{name}/files", params={"path": path}),
        ):
            assert response.status_code == 400, response.text
            assert response.json()["code"] == "InvalidParametersError"
            assert path in response.json()["message"]
    assert everything_under(root.parent) == before


def test_a_symbolic_link_a_job_left_is_never_followed(
    pai_server: RunningServer, team: tuple[str, Path], alice: Account, tmp_path: Path
) -> None:
    name, root = team
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.txt").write_text("not yours")
    (root / "escape").symlink_to(outside)
    try:
        with pai_server.client(alice.token) as client:
            read = client.get(f"/storages/{name}/content", params={"path": "escape/private.txt"})
            write = client.put(
                f"/storages/{name}/content", params={"path": "escape/new.txt"}, content=b"x"
            )
            listing = client.get(f"/storages/{name}/files").json()["entries"]
    finally:
        (root / "escape").unlink()
    for response in (read, write):
        assert response.status_code == 400
        assert "symbolic link" in response.json()["message"]
    assert sorted(os.listdir(outside)) == ["private.txt"]
    assert {"name": "escape", "type": "link"}.items() <= next(
        entry for entry in listing if entry["name"] == "escape"
    ).items()


def test_storage_definitions_are_checked_and_names_are_unique(
    pai_server: RunningServer, team: tuple[str, Path], tmp_path: Path
) -> None:
    name, _ = team
    with pai_server.client(pai_server.admin_token()) as client:
        duplicate = client.post(
            "/storages", json={"name": name, "type": "directory", "data": {"path": str(tmp_path)}}
        )
        relative = client.post(
            "/storages", json={"name": unique_storage(), "type": "directory", "data": {"path": "x"}}
        )
        missing = client.post(
            "/storages",
            json={
                "name": unique_storage(),
                "type": "directory",
                "data": {"path": str(tmp_path / "missing")},
            },
        )
        bad_name = client.post(
            "/storages", json={"name": "Bad_Name", "type": "directory", "data": {"path": "/tmp"}}
        )
        listed = client.get("/storages").json()["storages"]
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "ConflictStorageError")
    assert relative.status_code == 400 and "data.path" in relative.json()["message"]
    assert missing.status_code == 400 and "is not a directory" in missing.json()["message"]
    assert bad_name.status_code == 400 and "body.name" in bad_name.json()["message"]
    assert [storage["name"] for storage in listed].count(name) == 1
    assert len(listed) == len({storage["name"] for storage in listed})


def test_an_upload_over_the_limit_is_refused_and_leaves_nothing(
    start_pai_platform: object, tmp_path: Path
) -> None:
    from server.harness import server_settings

    home = tmp_path / "home"
    server = start_pai_platform(server_settings(home, max_upload_bytes=1000))  # type: ignore[operator]
    root = tmp_path / "small"
    root.mkdir()
    name = unique_storage()
    define_storage(server, name, "directory", {"path": str(root)})
    with server.client(server.admin_token()) as client:
        declared = client.put(
            f"/storages/{name}/content", params={"path": "big"}, content=b"x" * 1001
        )

        def unannounced() -> object:
            yield b"x" * 600
            yield b"x" * 600

        streamed = client.put(
            f"/storages/{name}/content", params={"path": "big"}, content=unannounced()
        )
        resumable = client.post(f"/storages/{name}/uploads", json={"path": "big", "size": 1001})
        fits = client.put(f"/storages/{name}/content", params={"path": "ok"}, content=b"x" * 1000)
    for response in (declared, streamed, resumable):
        assert response.status_code == 413, response.text
        assert "1000 bytes" in response.json()["message"]
    assert fits.status_code == 200
    assert everything_under(root) == {"ok"}


def test_a_read_only_storage_is_read_but_never_written(
    pai_server: RunningServer, alice: Account, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("a,b\n")
    name = unique_storage("ro")
    define_storage(pai_server, name, "directory", {"path": str(tmp_path)}, readOnly=True)
    new_group(pai_server, [name], [alice.username])
    with pai_server.client(alice.token) as client:
        read = client.get(f"/storages/{name}/content", params={"path": "data.csv"})
        write = client.put(f"/storages/{name}/content", params={"path": "x"}, content=b"x")
        remove = client.delete(f"/storages/{name}/files", params={"path": "data.csv"})
    assert read.content == b"a,b\n"
    assert [write.status_code, remove.status_code] == [403, 403]
    assert "read-only" in write.json()["message"]
    assert sorted(os.listdir(tmp_path)) == ["data.csv"]


def test_a_storage_that_is_not_shared_gives_each_user_a_folder_of_their_own(
    pai_server: RunningServer, alice: Account, bob: Account, tmp_path: Path
) -> None:
    name = unique_storage("home")
    define_storage(pai_server, name, "directory", {"path": str(tmp_path)}, share=False)
    new_group(pai_server, [name], [alice.username, bob.username])
    for account in (alice, bob):
        with pai_server.client(account.token) as client:
            response = client.put(
                f"/storages/{name}/content",
                params={"path": "notes.txt"},
                content=account.username.encode(),
            )
            assert response.status_code == 200
            assert [e["name"] for e in client.get(f"/storages/{name}/files").json()["entries"]] == [
                "notes.txt"
            ]
    for account in (alice, bob):
        assert (tmp_path / account.username / "notes.txt").read_text() == account.username


def test_a_resumable_upload_goes_on_from_where_it_stopped(
    pai_server: RunningServer, team: tuple[str, Path], alice: Account, bob: Account
) -> None:
    name, root = team
    data = os.urandom(3 * 1024 * 1024 + 17)
    with pai_server.client(alice.token) as client:
        started = client.post(
            f"/storages/{name}/uploads",
            json={"path": "big/blob.bin", "size": len(data), "fingerprint": "v1"},
        )
        assert started.status_code == 201, started.text
        upload = started.json()
        assert (upload["offset"], upload["complete"]) == (0, False)
        first = client.put(
            f"/storages/{name}/uploads/{upload['id']}",
            params={"offset": 0},
            content=data[:1_000_000],
        )
        assert first.json()["offset"] == 1_000_000
        assert not (root / "big" / "blob.bin").exists()

        wrong_offset = client.put(
            f"/storages/{name}/uploads/{upload['id']}", params={"offset": 5}, content=b"x"
        )
        assert (
            wrong_offset.status_code == 400 and "offset 1000000" in wrong_offset.json()["message"]
        )

        resumed = client.post(
            f"/storages/{name}/uploads",
            json={"path": "big/blob.bin", "size": len(data), "fingerprint": "v1"},
        )
        assert resumed.status_code == 200
        assert (resumed.json()["id"], resumed.json()["offset"]) == (upload["id"], 1_000_000)
        with pai_server.client(bob.token) as other:
            assert other.get(f"/storages/{name}/uploads/{upload['id']}").status_code == 403

        rest = client.put(
            f"/storages/{name}/uploads/{upload['id']}",
            params={"offset": 1_000_000},
            content=data[1_000_000:],
        )
        assert rest.json()["complete"] is True
        assert client.get(f"/storages/{name}/uploads").json() == []
    assert (root / "big" / "blob.bin").read_bytes() == data
    assert not any(entry.startswith(UPLOADS_FOLDER + "/") for entry in everything_under(root))


def test_every_change_is_in_the_audit_log_with_who_and_when(
    pai_server: RunningServer, alice: Account, tmp_path: Path
) -> None:
    name = unique_storage("audited")
    define_storage(pai_server, name, "directory", {"path": str(tmp_path)})
    new_group(pai_server, [name], [alice.username])
    with pai_server.client(alice.token) as client:
        client.put(f"/storages/{name}/content", params={"path": "a.txt"}, content=b"a")
        client.delete(f"/storages/{name}/files", params={"path": "a.txt"})
        assert client.get("/audit").status_code == 403
    with pai_server.client(pai_server.admin_token()) as client:
        updated = client.put(
            f"/storages/{name}",
            json={"type": "directory", "data": {"path": str(tmp_path)}, "readOnly": True},
        )
        assert updated.status_code == 200, updated.text
        storage_events = client.get("/audit", params={"kind": "storage", "target": name}).json()
        file_events = client.get("/audit", params={"kind": "file", "target": f"{name}:/"}).json()
        deleted = client.delete(f"/storages/{name}")
        assert deleted.status_code == 200
        after = client.get("/audit", params={"kind": "storage", "target": name}).json()
    assert [(e["action"], e["actor"]) for e in storage_events] == [
        ("update", "admin"),
        ("create", "admin"),
    ]
    assert storage_events[0]["details"]["changed"] == ["readOnly"]
    assert [(e["action"], e["actor"], e["target"]) for e in file_events] == [
        ("delete", alice.username, f"{name}:/a.txt"),
        ("upload", alice.username, f"{name}:/a.txt"),
    ]
    assert all(e["at"].endswith("Z") or "+00:00" in e["at"] for e in file_events)
    assert after[0]["action"] == "delete"
