"""A storage that is a bucket (or a prefix of one) of an S3-compatible service.

Folders are key prefixes, as every S3 tool shows them; an empty folder is kept as a
zero-byte `folder/` object. Writes go up as multipart uploads of PART_SIZE pieces, so at most
one piece is in memory, and a resumable upload is an S3 multipart upload whose parts the
service keeps between requests (and restarts of PAI).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from pai.errors import InvalidParametersError, ServiceUnavailableError
from pai.storage.backends.base import (
    READ_CHUNK,
    Entry,
    Quota,
    bounded,
    not_found,
    past_declared_size,
)
from pai.storage.kinds import S3Credentials, S3Location
from pai.storage.paths import StoragePath

PART_SIZE = 8 * 1024 * 1024
"""Size of every piece of a multipart upload but the last (S3 wants at least 5 MiB)."""
DELETE_BATCH = 1000
_MISSING = ("404", "NoSuchKey", "NotFound")


class S3Backend:
    """The objects under `location` (and under the user's folder when given)."""

    def __init__(
        self, location: S3Location, credentials: S3Credentials, *, user_folder: str | None = None
    ) -> None:
        self._bucket = location.bucket
        self._prefix = location.prefix + (f"{user_folder}/" if user_folder else "")
        self._where = f"{location.endpoint}/{location.bucket}"
        self._client = _client(
            location.endpoint,
            location.region,
            credentials.access_key_id,
            credentials.secret_access_key,
        )

    # -- reading ----------------------------------------------------------------------------

    def entries(self, path: StoragePath) -> list[Entry]:
        folder = self._folder_key(path)
        folders: list[Entry] = []
        files: list[Entry] = []
        with self._errors(path):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=folder, Delimiter="/"
            )
            for page in pages:
                for common in page.get("CommonPrefixes", []):
                    name = common["Prefix"][len(folder) :].rstrip("/")
                    folders.append(Entry(name, "directory", 0, None))
                for item in page.get("Contents", []):
                    name = item["Key"][len(folder) :]
                    if name:  # the folder's own marker
                        files.append(Entry(name, "file", item["Size"], item["LastModified"]))
        if not folders and not files and not path.is_root:
            self.stat(path)  # a file, or nothing: raise the right error
        return sorted(folders, key=lambda e: e.name) + sorted(files, key=lambda e: e.name)

    def stat(self, path: StoragePath) -> Entry:
        if path.is_root:
            return Entry("", "directory", 0, None)
        with self._errors(path):
            try:
                head = self._client.head_object(Bucket=self._bucket, Key=self._key(path))
                return Entry(path.name, "file", head["ContentLength"], head["LastModified"])
            except ClientError as error:
                if _code(error) not in _MISSING:
                    raise
            if self._is_folder(path):
                return Entry(path.name, "directory", 0, None)
        raise not_found(path)

    def read(self, path: StoragePath) -> Iterator[bytes]:
        with self._errors(path):
            try:
                answer = self._client.get_object(Bucket=self._bucket, Key=self._key(path))
            except ClientError as error:
                if _code(error) in _MISSING and self._is_folder(path):
                    raise InvalidParametersError(
                        f"'{path}' is a folder, not a file: list it instead"
                    ) from None
                raise
        return _chunks(answer["Body"])

    # -- writing ----------------------------------------------------------------------------

    def write(self, path: StoragePath, chunks: Iterable[bytes], *, limit: int) -> int:
        key = self._key(path)
        with self._errors(path):
            upload: dict[str, Any] | None = None
            buffer = bytearray()
            size = 0
            try:
                for chunk in bounded(chunks, limit):
                    buffer += chunk
                    size += len(chunk)
                    while len(buffer) >= PART_SIZE:
                        upload = upload or self._start(key)
                        self._send_part(upload, bytes(buffer[:PART_SIZE]))
                        del buffer[:PART_SIZE]
                if upload is None:
                    self._client.put_object(Bucket=self._bucket, Key=key, Body=bytes(buffer))
                    return size
                if buffer:
                    self._send_part(upload, bytes(buffer))
                self._complete(upload)
            except BaseException:
                if upload is not None:
                    self.abort_upload(upload)
                raise
        return size

    def make_folder(self, path: StoragePath) -> None:
        if path.is_root:
            return
        with self._errors(path):
            self._client.put_object(Bucket=self._bucket, Key=self._folder_key(path), Body=b"")

    def remove(self, path: StoragePath, *, recursive: bool) -> int:
        if path.is_root:
            raise InvalidParametersError("cannot remove the storage's root folder; name a file")
        entry = self.stat(path)
        with self._errors(path):
            if entry.type == "file":
                self._client.delete_object(Bucket=self._bucket, Key=self._key(path))
                return 1
            if not recursive:
                raise InvalidParametersError(
                    f"'{path}' is a folder: remove it with everything in it (recursive) or not"
                )
            return self._delete_prefix(self._folder_key(path))

    # -- space ------------------------------------------------------------------------------

    def quota(self) -> Quota | None:
        return None  # S3 reports no quota

    def free_bytes(self) -> int | None:
        return None

    # -- resumable uploads ------------------------------------------------------------------

    def begin_upload(self, upload_id: str, path: StoragePath) -> dict[str, Any]:
        with self._errors(path):
            return self._start(self._key(path))

    def upload_offset(self, state: dict[str, Any]) -> int:
        with self._errors(StoragePath(())):
            return sum(part["Size"] for part in self._parts(state))

    def append(
        self, state: dict[str, Any], offset: int, chunks: Iterable[bytes], *, size: int
    ) -> int:
        with self._errors(StoragePath(())):
            return self._append(state, offset, chunks, size)

    def _append(
        self, state: dict[str, Any], offset: int, chunks: Iterable[bytes], size: int
    ) -> int:
        held = sum(part["Size"] for part in self._parts(state))
        if offset != held:
            raise InvalidParametersError(
                f"the upload holds {held} bytes: send the data from offset {held}"
            )
        state = {**state, "next": held // PART_SIZE + 1}
        buffer = bytearray()
        for chunk in bounded(chunks, size - held, past_declared_size(size)):
            buffer += chunk
            while len(buffer) >= PART_SIZE:
                self._send_part(state, bytes(buffer[:PART_SIZE]))
                held += PART_SIZE
                del buffer[:PART_SIZE]
        if buffer and held + len(buffer) == size:  # the last piece may be short
            self._send_part(state, bytes(buffer))
            held += len(buffer)
        return held  # a short piece before the end is dropped: the client sends it again

    def finish_upload(self, state: dict[str, Any], path: StoragePath) -> None:
        with self._errors(path):
            if not self._parts(state):  # an empty file: S3 completes no upload without parts
                self.abort_upload(state)
                self._client.put_object(Bucket=self._bucket, Key=state["key"], Body=b"")
                return
            self._complete(state)

    def abort_upload(self, state: dict[str, Any]) -> None:
        with contextlib.suppress(ClientError):
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=state["key"], UploadId=state["uploadId"]
            )

    # -- helpers ----------------------------------------------------------------------------

    def _key(self, path: StoragePath) -> str:
        return self._prefix + path.text

    def _folder_key(self, path: StoragePath) -> str:
        return self._prefix + "".join(f"{part}/" for part in path.parts)

    def _is_folder(self, path: StoragePath) -> bool:
        listed = self._client.list_objects_v2(
            Bucket=self._bucket, Prefix=self._folder_key(path), MaxKeys=1
        )
        return bool(listed.get("KeyCount"))

    def _start(self, key: str) -> dict[str, Any]:
        created = self._client.create_multipart_upload(Bucket=self._bucket, Key=key)
        return {"key": key, "uploadId": created["UploadId"], "next": 1}

    def _send_part(self, upload: dict[str, Any], data: bytes) -> None:
        number = upload["next"]
        self._client.upload_part(
            Bucket=self._bucket,
            Key=upload["key"],
            UploadId=upload["uploadId"],
            PartNumber=number,
            Body=data,
        )
        upload["next"] = number + 1

    def _parts(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """The upload's parts numbered 1, 2, ... without a gap (a part after a gap would
        come from an interrupted request and is sent again)."""
        parts: list[dict[str, Any]] = []
        pages = self._client.get_paginator("list_parts").paginate(
            Bucket=self._bucket, Key=state["key"], UploadId=state["uploadId"]
        )
        for page in pages:
            parts.extend(page.get("Parts", []))
        parts.sort(key=lambda part: part["PartNumber"])
        contiguous = []
        for expected, part in enumerate(parts, start=1):
            if part["PartNumber"] != expected:
                break
            contiguous.append(part)
        return contiguous

    def _complete(self, upload: dict[str, Any]) -> None:
        parts = [
            {"PartNumber": part["PartNumber"], "ETag": part["ETag"]} for part in self._parts(upload)
        ]
        self._client.complete_multipart_upload(
            Bucket=self._bucket,
            Key=upload["key"],
            UploadId=upload["uploadId"],
            MultipartUpload={"Parts": parts},
        )

    def _delete_prefix(self, prefix: str) -> int:
        count = 0
        batch: list[dict[str, str]] = []
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket, Prefix=prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                batch.append({"Key": item["Key"]})
                count += 0 if item["Key"].endswith("/") else 1
                if len(batch) == DELETE_BATCH:
                    self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": batch})
                    batch = []
        if batch:
            self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": batch})
        return count

    @contextlib.contextmanager
    def _errors(self, path: StoragePath) -> Iterator[None]:
        """The service's failures as the user's errors, naming the storage's place."""
        try:
            yield
        except ClientError as error:
            code = _code(error)
            if code in _MISSING:
                raise not_found(path) from None
            if code == "NoSuchBucket":
                raise ServiceUnavailableError(
                    f"the storage's bucket {self._where} does not exist"
                ) from None
            raise ServiceUnavailableError(
                f"the storage's S3 service at {self._where} refused: {code}"
            ) from None
        except BotoCoreError as error:
            raise ServiceUnavailableError(
                f"the storage's S3 service at {self._where} cannot be reached: {error}"
            ) from None


def check_bucket(location: S3Location, credentials: S3Credentials) -> None:
    """Raise ServiceUnavailableError unless the bucket answers with these credentials."""
    backend = S3Backend(location, credentials)
    backend.entries(StoragePath(()))


@lru_cache(maxsize=64)
def _client(endpoint: str, region: str, access_key_id: str, secret: str) -> Any:
    """One client per storage definition (boto3 clients are thread-safe and slow to make)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret,
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=5,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
        ),
    )


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _chunks(body: Any) -> Iterator[bytes]:
    with contextlib.closing(body):
        yield from body.iter_chunks(READ_CHUNK)
