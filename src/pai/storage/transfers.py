"""Files in and out of storages on behalf of a user: listing, downloads, uploads (whole or in
resumable pieces) and removals, each write in the audit log.

No database transaction is held while data moves: the storage is looked up (and the caller's
right to it checked) first, the bytes stream between the client and the backend, and the
audit record (or the upload's row) is written afterwards in a short transaction of its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pai.auth.permissions import Principal
from pai.diskfloor import DiskFloor
from pai.errors import (
    ForbiddenUserError,
    InsufficientStorageError,
    InvalidParametersError,
    NoFileError,
)
from pai.storage.access import Credentials, open_backend, usable_storage
from pai.storage.backends.base import Backend, Entry, over_limit
from pai.storage.backends.s3 import PART_SIZE
from pai.storage.paths import StoragePath
from pai.store import Database, audit, storages
from pai.store.sharing import UploadRow

AUDIT_KIND = "file"
CHUNK_SIZE = PART_SIZE
"""The piece size clients send resumable uploads in (every piece but the last)."""


@dataclass(frozen=True)
class OpenedStorage:
    """A storage a caller may use, with the files they see in it."""

    name: str
    read_only: bool
    backend: Backend

    def target(self, path: StoragePath) -> str:
        """How the audit log names a file: `storage:/path`."""
        return f"{self.name}:{path}"


@dataclass(frozen=True)
class Upload:
    """A resumable upload and how far it has come."""

    row: UploadRow
    offset: int

    @property
    def complete(self) -> bool:
        return self.offset >= self.row.size


class Transfers:
    def __init__(
        self,
        database: Database,
        credentials: Credentials,
        max_upload_bytes: int,
        disk_floor: DiskFloor | None = None,
    ):
        """`disk_floor`: the room an upload leaves free on a storage's disk (PAI_DISK_FLOOR),
        so that uploads never take the last of a disk PAI's store may share."""
        self._database = database
        self._credentials = credentials
        self.max_upload_bytes = max_upload_bytes
        self._disk_floor = disk_floor or DiskFloor()

    def open(self, caller: Principal, name: str) -> OpenedStorage:
        with self._database.reading() as session:
            row = usable_storage(session, caller, name)
            return OpenedStorage(
                row.name, row.read_only, open_backend(row, caller.username, self._credentials)
            )

    # -- reading ----------------------------------------------------------------------------

    def entries(self, caller: Principal, name: str, path: StoragePath) -> list[Entry]:
        return self.open(caller, name).backend.entries(path)

    def download(
        self, caller: Principal, name: str, path: StoragePath
    ) -> tuple[Entry, Iterator[bytes]]:
        backend = self.open(caller, name).backend
        entry = backend.stat(path)
        if entry.type == "directory":
            raise InvalidParametersError(f"'{path}' is a folder, not a file: list it instead")
        return entry, backend.read(path)

    # -- writing ----------------------------------------------------------------------------

    def upload(
        self,
        caller: Principal,
        name: str,
        path: StoragePath,
        chunks: Iterable[bytes],
        *,
        declared_size: int | None,
    ) -> int:
        """Store a whole file sent in one request (replacing any file at `path`)."""
        storage = self._writable(caller, name)
        if declared_size is not None:
            self._check_room(storage.backend, declared_size)
        size = storage.backend.write(path, chunks, limit=self.max_upload_bytes)
        self._audit(caller, "upload", storage.target(path), size=size)
        return size

    def make_folder(self, caller: Principal, name: str, path: StoragePath) -> None:
        storage = self._writable(caller, name)
        storage.backend.make_folder(path)
        self._audit(caller, "mkdir", storage.target(path))

    def remove(self, caller: Principal, name: str, path: StoragePath, *, recursive: bool) -> int:
        storage = self._writable(caller, name)
        removed = storage.backend.remove(path, recursive=recursive)
        self._audit(caller, "delete", storage.target(path), files=removed)
        return removed

    # -- resumable uploads ------------------------------------------------------------------

    def start_upload(
        self, caller: Principal, name: str, path: StoragePath, size: int, fingerprint: str
    ) -> tuple[Upload, bool]:
        """The caller's upload of `size` bytes to `path` with this fingerprint if one is in
        progress (to resume), else a new one; True when it is new."""
        storage = self._writable(caller, name)
        if path.is_root:
            raise InvalidParametersError("path: name the file to upload, not the root folder")
        for upload in self.uploads(caller, name):
            row = upload.row
            if (row.path, row.size, row.fingerprint) == (path.text, size, fingerprint):
                return upload, False
        self._check_room(storage.backend, size)
        upload_id = secrets.token_hex(16)
        state = storage.backend.begin_upload(upload_id, path)
        with self._database.session() as session:
            row = UploadRow(
                id=upload_id,
                storage_id=usable_storage(session, caller, name).id,
                username=caller.username,
                path=path.text,
                size=size,
                fingerprint=fingerprint,
                state=state,
            )
            session.add(row)
        return Upload(row, 0), True

    def uploads(self, caller: Principal, name: str) -> list[Upload]:
        """The caller's uploads in progress to this storage, oldest first."""
        storage = self.open(caller, name)
        with self._database.reading() as session:
            rows = storages.uploads_of(
                session, usable_storage(session, caller, name), caller.username
            )
        return [Upload(row, storage.backend.upload_offset(row.state)) for row in rows]

    def upload_status(self, caller: Principal, name: str, upload_id: str) -> Upload:
        storage, row = self._upload(caller, name, upload_id)
        return Upload(row, storage.backend.upload_offset(row.state))

    def append(
        self, caller: Principal, name: str, upload_id: str, offset: int, chunks: Iterable[bytes]
    ) -> Upload:
        """Add a piece at `offset`; the piece that completes the file puts it in place."""
        storage, row = self._upload(caller, name, upload_id)
        held = storage.backend.append(row.state, offset, chunks, size=row.size)
        upload = Upload(row, held)
        if upload.complete:
            path = StoragePath(tuple(row.path.split("/")))
            storage.backend.finish_upload(row.state, path)
            with self._database.session() as session:
                session.delete(session.merge(row))
                audit.record(
                    session,
                    caller.username,
                    "upload",
                    AUDIT_KIND,
                    storage.target(path),
                    size=row.size,
                    resumable=True,
                )
        return upload

    def abort(self, caller: Principal, name: str, upload_id: str) -> None:
        storage, row = self._upload(caller, name, upload_id)
        storage.backend.abort_upload(row.state)
        with self._database.session() as session:
            session.delete(session.merge(row))

    # -- helpers ----------------------------------------------------------------------------

    def _writable(self, caller: Principal, name: str) -> OpenedStorage:
        storage = self.open(caller, name)
        if storage.read_only:
            raise ForbiddenUserError(f"storage '{name}' is read-only")
        return storage

    def _upload(
        self, caller: Principal, name: str, upload_id: str
    ) -> tuple[OpenedStorage, UploadRow]:
        storage = self._writable(caller, name)
        with self._database.reading() as session:
            row = storages.find_upload(session, upload_id)
            if row is None or row.storage_id != usable_storage(session, caller, name).id:
                raise NoFileError(f"storage '{name}' has no upload '{upload_id}' in progress")
            if not caller.may_act_for(row.username):
                raise ForbiddenUserError(
                    f"upload '{upload_id}' is {row.username}'s: only they or an administrator "
                    "may continue or abort it"
                )
        return storage, row

    def _check_room(self, backend: Backend, size: int) -> None:
        if size > self.max_upload_bytes:
            raise over_limit(self.max_upload_bytes)
        free = backend.free_bytes()
        quota = backend.quota()
        kept = self._disk_floor.bytes_on(quota.limit_bytes) if quota is not None else 0
        if free is not None and size > free - kept:
            raise InsufficientStorageError(
                f"the storage has {free} bytes free, {kept} of them kept free for PAI's store "
                f"(PAI_DISK_FLOOR): fewer than the {size} to upload"
            )

    def _audit(self, caller: Principal, action: str, target: str, **details: object) -> None:
        with self._database.session() as session:
            audit.record(session, caller.username, action, AUDIT_KIND, target, **details)
