"""What every storage backend offers: list, read, write and remove files, resumable uploads,
and the space used where the kind knows it. Data always moves as iterators of chunks, so no
file is ever held in memory whole."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pai.errors import InvalidParametersError, NoFileError
from pai.storage.paths import StoragePath

READ_CHUNK = 1024 * 1024
EntryType = Literal["file", "directory", "link", "other"]


@dataclass(frozen=True)
class Entry:
    """A file or folder of a storage."""

    name: str
    type: EntryType
    size: int
    modified: datetime | None


@dataclass(frozen=True)
class Quota:
    """Space as the storage reports it; a directory reports its file system's."""

    used_bytes: int
    limit_bytes: int


class Backend(Protocol):
    """The files of one storage (or of one user's folder of an unshared storage)."""

    def entries(self, path: StoragePath) -> list[Entry]:
        """The folder's content, folders first then by name (NoFileError if it is missing,
        InvalidParametersError if it is a file)."""

    def stat(self, path: StoragePath) -> Entry:
        """The entry at `path` (the root is a folder)."""

    def read(self, path: StoragePath) -> Iterator[bytes]:
        """The file's bytes, in chunks of at most READ_CHUNK."""

    def write(self, path: StoragePath, chunks: Iterable[bytes], *, limit: int) -> int:
        """Store `chunks` as the file at `path` (replacing it whole, or not at all if the
        chunks stop with an error or pass `limit` bytes); missing folders are made. Returns
        the size."""

    def remove(self, path: StoragePath, *, recursive: bool) -> int:
        """Remove the file, or the folder (with everything in it only when `recursive`);
        returns how many files went."""

    def make_folder(self, path: StoragePath) -> None:
        """Make the folder (and its parents); nothing if it exists."""

    def quota(self) -> Quota | None:
        """Used and total space, when the kind reports it."""

    def free_bytes(self) -> int | None:
        """Room left for new data, when the kind knows it."""

    # -- resumable uploads: the state is JSON kept in the store between requests ------------

    def begin_upload(self, upload_id: str, path: StoragePath) -> dict[str, Any]:
        """Prepare to receive a file in pieces; the returned state identifies the upload."""

    def upload_offset(self, state: dict[str, Any]) -> int:
        """How many bytes of the upload the backend holds."""

    def append(
        self, state: dict[str, Any], offset: int, chunks: Iterable[bytes], *, size: int
    ) -> int:
        """Add bytes at `offset` (which must be `upload_offset`) without going past `size`;
        returns the new offset, which is what the backend durably holds even when the chunks
        stop with an error."""

    def finish_upload(self, state: dict[str, Any], path: StoragePath) -> None:
        """Put the complete upload in place at `path` at once."""

    def abort_upload(self, state: dict[str, Any]) -> None:
        """Drop what the upload holds."""


def not_found(path: StoragePath) -> NoFileError:
    return NoFileError(f"'{path}' does not exist in the storage")


def over_limit(limit: int) -> InvalidParametersError:
    return InvalidParametersError(
        f"the upload is larger than the {limit} bytes allowed (PAI_MAX_UPLOAD_BYTES)",
        status=413,
    )


def past_declared_size(size: int) -> InvalidParametersError:
    return InvalidParametersError(
        f"the data goes past the upload's declared size of {size} bytes", status=413
    )


def bounded(
    chunks: Iterable[bytes], limit: int, too_much: InvalidParametersError | None = None
) -> Iterator[bytes]:
    """`chunks`, refused (413) as soon as they pass `limit` bytes in total."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise too_much or over_limit(limit)
        yield chunk
