"""An S3 storage against a real S3-compatible server started for the module: moto's
standalone server (`moto_server`, from the PyPI package moto) on a loopback port, in a
process of its own.

Files go in and out through the API and `pai storage`, in one request and in resumable
pieces (which S3 keeps as a multipart upload); a job reaches the bucket with the variables
and credentials PAI gives its task; the credentials are never shown back."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli.pai_runner import make_pai
from server.harness import Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for
from server.storagehelpers import (
    S3_KEYS,
    S3Server,
    define_storage,
    moto_server_command,
    new_group,
    s3_server,
    unique_storage,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(
    tmp_path_factory: pytest.TempPathFactory, requirement: Callable[[bool, str], None]
) -> Iterator[S3Server]:
    requirement(
        moto_server_command() is not None,
        "moto's S3 server is not installed (pip install 'moto[s3]' flask flask-cors)",
    )
    with s3_server(tmp_path_factory.mktemp("s3") / "moto.log") as server:
        yield server


@pytest.fixture(scope="module")
def bucket_storage(sqlite_platform: RunningServer, s3: S3Server, alice: Account) -> str:
    name = unique_storage("s3")
    define_storage(sqlite_platform, name, "s3", s3.data(prefix=f"{name}/"))
    new_group(sqlite_platform, [name], [alice.username])
    return name


def objects(s3: S3Server, prefix: str) -> dict[str, bytes]:
    client = s3.client()
    listed = client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=s3.bucket, Key=item["Key"])["Body"].read()
        for item in listed
    }


def test_files_go_in_and_out_of_the_bucket_and_credentials_are_never_shown(
    sqlite_platform: RunningServer, s3: S3Server, bucket_storage: str, alice: Account
) -> None:
    name = bucket_storage
    with sqlite_platform.client(alice.token) as client:
        written = client.put(
            f"/storages/{name}/content", params={"path": "data/a.txt"}, content=b"alpha"
        )
        assert written.status_code == 200, written.text
        listing = client.get(f"/storages/{name}/files", params={"path": "data"}).json()
        root = client.get(f"/storages/{name}/files").json()
        content = client.get(f"/storages/{name}/content", params={"path": "data/a.txt"}).content
        folder_read = client.get(f"/storages/{name}/content", params={"path": "data"})
        detail = client.get(f"/storages/{name}").json()
        removed = client.delete(
            f"/storages/{name}/files", params={"path": "data", "recursive": "true"}
        )
    assert objects(s3, f"{name}/") == {}
    assert [(e["name"], e["size"]) for e in listing["entries"]] == [("a.txt", 5)]
    assert [(e["name"], e["type"]) for e in root["entries"]] == [("data", "directory")]
    assert content == b"alpha"
    assert folder_read.status_code == 400 and "is a folder" in folder_read.json()["message"]
    assert removed.json()["removedFiles"] == 1
    assert detail["type"] == "s3" and detail["quota"] is None
    assert detail["data"]["bucket"] == s3.bucket
    assert detail["data"]["secretAccessKey"] == "******"
    assert S3_KEYS["secretAccessKey"] not in str(detail)


def test_a_large_file_goes_up_in_resumable_pieces_kept_by_the_service(
    sqlite_platform: RunningServer,
    s3: S3Server,
    bucket_storage: str,
    alice: Account,
    tmp_path: Path,
) -> None:
    name = bucket_storage
    data = os.urandom(20 * 1024 * 1024 + 5)
    cli_fingerprint = f"1:{len(data)}"  # what `pai storage cp` sends: the file's time and size
    with sqlite_platform.client(alice.token) as client:
        other = client.post(
            f"/storages/{name}/uploads",
            json={"path": "big.bin", "size": len(data), "fingerprint": "another file"},
        ).json()
        upload = client.post(
            f"/storages/{name}/uploads",
            json={"path": "big.bin", "size": len(data), "fingerprint": cli_fingerprint},
        ).json()
        piece = upload["chunkSize"]
        first = client.put(
            f"/storages/{name}/uploads/{upload['id']}", params={"offset": 0}, content=data[:piece]
        ).json()
        # A request cut short mid-piece: the service keeps only whole pieces.
        short = client.put(
            f"/storages/{name}/uploads/{upload['id']}",
            params={"offset": piece},
            content=data[piece : piece + 1000],
        ).json()
    assert first["offset"] == piece and short["offset"] == piece
    assert f"{name}/big.bin" not in objects(s3, f"{name}/")

    source = tmp_path / "big.bin"
    source.write_bytes(data)
    os.utime(source, ns=(1, 1))
    pai = make_pai(tmp_path)
    pai.login(sqlite_platform, alice.username, alice.password)
    # `pai storage cp` goes on with the upload in progress of the same file, from its offset.
    copied = pai.run("storage", "cp", str(source), f"{name}:big.bin")
    assert copied.returncode == 0, copied.stderr
    assert objects(s3, f"{name}/big.bin")[f"{name}/big.bin"] == data
    back = pai.run("storage", "cp", f"{name}:big.bin", str(tmp_path / "back.bin"))
    assert back.returncode == 0, back.stderr
    assert (tmp_path / "back.bin").read_bytes() == data
    with sqlite_platform.client(alice.token) as client:
        finished = client.get(f"/storages/{name}/uploads/{upload['id']}")
        assert (finished.status_code, finished.json()["code"]) == (404, "NoFileError")
        left = client.get(f"/storages/{name}/uploads").json()
        assert [item["id"] for item in left] == [other["id"]]
        assert client.delete(f"/storages/{name}/uploads/{other['id']}").status_code == 200
        assert client.get(f"/storages/{name}/uploads").json() == []


def test_a_job_reaches_the_bucket_with_the_variables_its_task_gets(
    sqlite_platform: RunningServer,
    s3: S3Server,
    bucket_storage: str,
    alice: Account,
    tmp_path: Path,
) -> None:
    name = bucket_storage
    variable = "PAI_STORAGE_" + name.upper().replace("-", "_")
    script = (
        "import boto3, os; "
        f"bucket, _, prefix = os.environ['{variable}'].removeprefix('s3://').partition('/'); "
        "boto3.client('s3').put_object(Bucket=bucket, Key=prefix + 'from-job.txt', "
        "Body=os.environ['PAI_JOB_NAME'].encode())"
    )
    job = job_yaml(
        unique("s3-writer"),
        [
            f'{sys.executable} -c "{script}"',
        ],
        extras=f"  storages:\n    - name: {name}",
    )
    with sqlite_platform.client(alice.token) as client:
        framework = submit(client, job)
        assert wait_for(client, framework)["jobStatus"]["state"] == "SUCCEEDED"
    pai = make_pai(tmp_path)
    pai.login(sqlite_platform, alice.username, alice.password)
    copied = pai.run("storage", "cp", f"{name}:from-job.txt", str(tmp_path / "from-job.txt"))
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "from-job.txt").read_text() == framework
