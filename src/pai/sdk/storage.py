"""Storages and their files: what the caller may use, and copying files in and out.

    for storage in client.storages():
        print(storage.name, storage.quota)
    client.upload("team-data", "datasets/train.csv", Path("train.csv"))
    client.download("team-data", "runs/1/result.txt", Path("result.txt"))

Large uploads go in resumable pieces: an upload cut short (a network failure, Ctrl-C) goes on
from where it stopped when the same file is uploaded to the same path again. Data is read and
written in pieces, so memory use does not grow with the file's size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import Field

from pai.sdk.base import ApiBase
from pai.sdk.model import ApiModel
from pai.sdk.names import segment

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes in all) as a transfer goes on."""
WHOLE_UPLOAD_LIMIT = 8 * 1024 * 1024
"""Files up to this size go in one request; larger ones in resumable pieces."""
READ_PIECE = 1024 * 1024


class StorageQuota(ApiModel):
    used_bytes: int
    limit_bytes: int


class Storage(ApiModel):
    """A storage the caller may use (`GET /storages`), or its detail (`GET /storages/{name}`)."""

    name: str
    share: bool = True
    volume_name: str = ""
    default: bool = False
    type: str = ""
    read_only: bool = False
    description: str = ""
    quota: StorageQuota | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    """Where it lives (detail only); credentials are shown as ******."""


class FileEntry(ApiModel):
    name: str
    path: str
    type: str
    """file, directory, link or other."""
    size: int = 0
    modified: datetime | None = None


class FileListing(ApiModel):
    storage: str
    path: str
    type: str
    entries: list[FileEntry] = Field(default_factory=list)


class UploadStatus(ApiModel):
    id: str
    storage: str
    path: str
    size: int
    offset: int
    chunk_size: int
    complete: bool


class AuditEvent(ApiModel):
    id: int
    at: datetime
    actor: str
    action: str
    kind: str
    target: str
    details: dict[str, Any] = Field(default_factory=dict)


class StorageApi(ApiBase):
    """Methods for storages and their files."""

    def storages(self, *, defaults_only: bool = False) -> list[Storage]:
        """The storages the caller may use (only the defaults, mounted by `storages: []`)."""
        params = {"default": "true"} if defaults_only else None
        body = self._transport.get("/storages", params=params)
        return [Storage.model_validate(item) for item in body["storages"]]

    def storage(self, name: str) -> Storage:
        return Storage.model_validate(self._transport.get(f"/storages/{segment(name)}"))

    def files(self, storage: str, path: str = "") -> FileListing:
        """What is at `path`: a folder's entries, or the file itself."""
        body = self._transport.get(f"/storages/{segment(storage)}/files", params={"path": path})
        return FileListing.model_validate(body)

    def make_folder(self, storage: str, path: str) -> None:
        self._transport.request(
            "POST", f"/storages/{segment(storage)}/folders", params={"path": path}
        )

    def remove(self, storage: str, path: str, *, recursive: bool = False) -> int:
        """Remove a file, or a folder with everything in it when `recursive`; returns the
        number of files removed."""
        params = {"path": path, "recursive": "true" if recursive else "false"}
        response = self._transport.request(
            "DELETE", f"/storages/{segment(storage)}/files", params=params
        )
        removed: int = response.json()["removedFiles"]
        return removed

    def download(
        self, storage: str, path: str, target: Path, *, progress: Progress | None = None
    ) -> int:
        """Copy the file at `path` to `target`, which appears only once complete."""
        url = f"/storages/{segment(storage)}/content"
        staging = target.with_name(f".{target.name}.pai-download")
        received = 0
        with self._transport.stream(url, params={"path": path}, follow=True) as response:
            total = int(response.headers.get("content-length", 0))
            try:
                with staging.open("wb") as file:
                    for chunk in response.iter_bytes(READ_PIECE):
                        file.write(chunk)
                        received += len(chunk)
                        if progress:
                            progress(received, total)
                os.replace(staging, target)
            finally:
                staging.unlink(missing_ok=True)
        return received

    def upload(
        self, storage: str, path: str, source: Path, *, progress: Progress | None = None
    ) -> int:
        """Copy the file `source` to `path` (replacing a file there); a large one goes in
        resumable pieces, resuming an upload of the same file cut short before."""
        status = source.stat()
        if status.st_size <= WHOLE_UPLOAD_LIMIT:
            with source.open("rb") as file:
                self._transport.request(
                    "PUT",
                    f"/storages/{segment(storage)}/content",
                    params={"path": path},
                    content=_pieces(file, status.st_size, progress),
                    headers={"Content-Length": str(status.st_size)},
                )
            return status.st_size
        upload = self.start_upload(
            storage, path, status.st_size, fingerprint=f"{status.st_mtime_ns}:{status.st_size}"
        )
        if progress:
            progress(upload.offset, upload.size)
        with source.open("rb") as file:
            while not upload.complete:
                file.seek(upload.offset)
                length = min(upload.chunk_size, upload.size - upload.offset)
                upload = self.send_piece(
                    storage, upload.id, upload.offset, _pieces(file, length, None), length
                )
                if progress:
                    progress(upload.offset, upload.size)
        return status.st_size

    def start_upload(
        self, storage: str, path: str, size: int, *, fingerprint: str = ""
    ) -> UploadStatus:
        """A resumable upload: a new one, or the caller's upload in progress of the same
        path, size and fingerprint (go on from its `offset`)."""
        body = self._transport.send(
            "POST",
            f"/storages/{segment(storage)}/uploads",
            {"path": path, "size": size, "fingerprint": fingerprint},
        )
        return UploadStatus.model_validate(body)

    def send_piece(
        self, storage: str, upload_id: str, offset: int, data: Iterable[bytes], length: int
    ) -> UploadStatus:
        """Send `length` bytes (given in pieces, so a large piece is never held whole) at
        `offset` of an upload; the answer says how far the upload has come."""
        response = self._transport.request(
            "PUT",
            f"/storages/{segment(storage)}/uploads/{segment(upload_id)}",
            params={"offset": offset},
            content=data,
            headers={"Content-Length": str(length)},
        )
        return UploadStatus.model_validate(response.json())

    def uploads(self, storage: str) -> list[UploadStatus]:
        """The caller's uploads in progress to `storage`."""
        body = self._transport.get(f"/storages/{segment(storage)}/uploads")
        return [UploadStatus.model_validate(item) for item in body]

    def abort_upload(self, storage: str, upload_id: str) -> None:
        self._transport.request(
            "DELETE", f"/storages/{segment(storage)}/uploads/{segment(upload_id)}"
        )

    # -- administrators ---------------------------------------------------------------------

    def create_storage(
        self,
        name: str,
        kind: str,
        data: dict[str, Any],
        *,
        description: str = "",
        share: bool = True,
        read_only: bool = False,
    ) -> str:
        """Define a storage (admin): `kind` "directory" with `data={"path": ...}`, or "s3"
        with endpoint, bucket, prefix, region, accessKeyId and secretAccessKey."""
        body = {
            "name": name,
            "type": kind,
            "data": data,
            "description": description,
            "share": share,
            "readOnly": read_only,
        }
        return str(self._transport.send("POST", "/storages", body)["message"])

    def delete_storage(self, name: str) -> str:
        return str(self._transport.send("DELETE", f"/storages/{segment(name)}")["message"])

    def audit(
        self,
        *,
        kind: str | None = None,
        target: str | None = None,
        actor: str | None = None,
        limit: int = 100,
    ) -> list[AuditEvent]:
        """Who changed which storage, file or marketplace item, and when (admin)."""
        params: dict[str, str | int] = {"limit": limit}
        for key, value in (("kind", kind), ("target", target), ("actor", actor)):
            if value is not None:
                params[key] = value
        return [AuditEvent.model_validate(item) for item in self._transport.get("/audit", params)]


def _pieces(file: BinaryIO, total: int, progress: Progress | None) -> Iterator[bytes]:
    """The next `total` bytes of `file`, read a piece at a time."""
    sent = 0
    while sent < total and (piece := file.read(min(READ_PIECE, total - sent))):
        sent += len(piece)
        if progress:
            progress(sent, total)
        yield piece
