"""A storage that is a directory of this machine's file system (a local disk, or an NFS/SMB
share mounted at the same path on every node).

Jobs write into these directories, and a job may leave a symbolic link pointing anywhere (at
`/etc`, say) while the server reads and writes as its own user. So every path is walked one
folder at a time from the storage's root with `O_NOFOLLOW`, relative to the folder opened
before (`openat`): a link is never followed, and nothing outside the root can be reached,
even when the tree changes while it is walked. Files are written under a temporary name and
renamed into place, so a reader sees the old file or the new one, never a part.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from pai.errors import (
    ConflictStorageError,
    InsufficientStorageError,
    InvalidParametersError,
    ServiceUnavailableError,
)
from pai.storage.backends.base import (
    READ_CHUNK,
    Entry,
    EntryType,
    Quota,
    bounded,
    not_found,
    past_declared_size,
)
from pai.storage.paths import RESERVED_NAME, StoragePath

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
PARTIAL_MARK = ".pai-partial-"


class DirectoryBackend:
    """The files under `root`; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def for_user(cls, root: Path, username: str | None) -> DirectoryBackend:
        """The storage at `root`, or the user's own folder in it (made when missing) when
        `username` is given (a storage that is not shared)."""
        backend = cls(root)
        if username is None:
            return backend
        backend.make_folder(StoragePath((username,)))
        return cls(root / username)

    # -- reading ----------------------------------------------------------------------------

    def entries(self, path: StoragePath) -> list[Entry]:
        with self._folder(path) as fd:
            found = []
            with os.scandir(fd) as listing:
                for item in listing:
                    if path.is_root and item.name == RESERVED_NAME:
                        continue
                    if PARTIAL_MARK in item.name:
                        continue
                    found.append(_entry(item.name, item.stat(follow_symlinks=False)))
        return sorted(found, key=lambda entry: (entry.type != "directory", entry.name))

    def stat(self, path: StoragePath) -> Entry:
        if path.is_root:
            with self._folder(path) as fd:
                return _entry("", os.fstat(fd))
        with self._folder(path.parent) as fd:
            return _entry(path.name, self._lstat(fd, path))

    def read(self, path: StoragePath) -> Iterator[bytes]:
        with self._folder(path.parent) as fd:
            try:
                descriptor = os.open(path.name, os.O_RDONLY | _FILE_FLAGS, dir_fd=fd)
            except OSError as error:
                raise self._explain(error, fd, path) from None
        file = os.fdopen(descriptor, "rb")
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            file.close()
            raise InvalidParametersError(f"'{path}' is a folder, not a file: list it instead")
        return _chunks(file)

    # -- writing ----------------------------------------------------------------------------

    def write(self, path: StoragePath, chunks: Iterable[bytes], *, limit: int) -> int:
        _refuse_root(path, "write")
        with self._folder(path.parent, create=True) as fd:
            staging = f".{path.name[:100]}{PARTIAL_MARK}{secrets.token_hex(6)}"
            descriptor = os.open(
                staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, 0o644, dir_fd=fd
            )
            try:
                with os.fdopen(descriptor, "wb") as file, _room_for(f"'{path}'"):
                    size = _copy(bounded(chunks, limit), file)
                self._rename_into(fd, staging, fd, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(staging, dir_fd=fd)
                raise
        return size

    def make_folder(self, path: StoragePath) -> None:
        with self._folder(path, create=True):
            pass

    def remove(self, path: StoragePath, *, recursive: bool) -> int:
        _refuse_root(path, "remove")
        with self._folder(path.parent) as fd:
            status = self._lstat(fd, path)
            if not stat.S_ISDIR(status.st_mode):
                os.unlink(path.name, dir_fd=fd)
                return 1
            if not recursive:
                raise InvalidParametersError(
                    f"'{path}' is a folder: remove it with everything in it (recursive) or not"
                )
            count = sum(
                len(files)
                for _, _, files, _ in os.fwalk(path.name, dir_fd=fd, follow_symlinks=False)
            )
            shutil.rmtree(path.name, dir_fd=fd)
            return count

    # -- space ------------------------------------------------------------------------------

    def quota(self) -> Quota | None:
        space = self._statvfs()
        return Quota(
            used_bytes=(space.f_blocks - space.f_bfree) * space.f_frsize,
            limit_bytes=space.f_blocks * space.f_frsize,
        )

    def free_bytes(self) -> int | None:
        space = self._statvfs()
        return space.f_bavail * space.f_frsize

    # -- resumable uploads ------------------------------------------------------------------

    def begin_upload(self, upload_id: str, path: StoragePath) -> dict[str, Any]:
        with self._folder(StoragePath((RESERVED_NAME,)), create=True) as fd:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS
            os.close(os.open(upload_id, flags, 0o600, dir_fd=fd))
        return {"file": upload_id}

    def upload_offset(self, state: dict[str, Any]) -> int:
        with self._uploads() as fd:
            return os.stat(state["file"], dir_fd=fd, follow_symlinks=False).st_size

    def append(
        self, state: dict[str, Any], offset: int, chunks: Iterable[bytes], *, size: int
    ) -> int:
        with self._uploads() as fd:
            descriptor = os.open(state["file"], os.O_WRONLY | _FILE_FLAGS, dir_fd=fd)
        with os.fdopen(descriptor, "wb") as file:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConflictStorageError(
                    "another request is sending data to this upload; wait for it to end"
                ) from None
            held = os.fstat(descriptor).st_size
            if offset != held:
                raise InvalidParametersError(
                    f"the upload holds {held} bytes: send the data from offset {held}"
                )
            file.seek(held)
            try:
                with _room_for("the upload"):
                    _copy(bounded(chunks, size - held, past_declared_size(size)), file)
            finally:
                file.flush()
                os.fsync(descriptor)
            return os.fstat(descriptor).st_size

    def finish_upload(self, state: dict[str, Any], path: StoragePath) -> None:
        _refuse_root(path, "write")
        with self._uploads() as uploads, self._folder(path.parent, create=True) as target:
            self._rename_into(uploads, state["file"], target, path)

    def abort_upload(self, state: dict[str, Any]) -> None:
        with self._uploads() as fd, contextlib.suppress(FileNotFoundError):
            os.unlink(state["file"], dir_fd=fd)

    # -- helpers ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _folder(self, path: StoragePath, *, create: bool = False) -> Iterator[int]:
        """An open descriptor of the folder at `path`, walked without following links."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise ServiceUnavailableError(
                f"the storage's directory {self.root} cannot be opened on the PAI server's "
                f"machine ({error.strerror}); the administrator must mount it there"
            ) from None
        try:
            walked = StoragePath(())
            for part in path.parts:
                walked = walked.child(part)
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    inner = os.open(part, _FOLDER_FLAGS, dir_fd=fd)
                except OSError as error:
                    raise self._explain(error, fd, walked) from None
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _uploads(self) -> Iterator[int]:
        with self._folder(StoragePath((RESERVED_NAME,)), create=True) as fd:
            yield fd

    def _lstat(self, fd: int, path: StoragePath) -> os.stat_result:
        try:
            return os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except OSError as error:
            raise self._explain(error, fd, path) from None

    def _rename_into(self, from_fd: int, name: str, to_fd: int, path: StoragePath) -> None:
        try:
            os.rename(name, path.name, src_dir_fd=from_fd, dst_dir_fd=to_fd)
        except IsADirectoryError:
            raise InvalidParametersError(
                f"'{path}' is a folder: a file cannot replace it"
            ) from None

    def _explain(self, error: OSError, fd: int, path: StoragePath) -> Exception:
        """The user's error for a failed step of a walk (or an open) at `path`."""
        if error.errno == errno.ENOENT:
            return not_found(path)
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            with contextlib.suppress(OSError):
                mode = os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    return InvalidParametersError(
                        f"'{path}' is a symbolic link, which the file API does not follow"
                    )
            return InvalidParametersError(f"'{path}' is a file, not a folder")
        return InvalidParametersError(f"'{path}': {error.strerror}")

    def _statvfs(self) -> os.statvfs_result:
        try:
            return os.statvfs(self.root)
        except OSError as error:
            raise ServiceUnavailableError(
                f"the storage's directory {self.root} cannot be read on the PAI server's "
                f"machine ({error.strerror})"
            ) from None


def _entry(name: str, status: os.stat_result) -> Entry:
    mode = status.st_mode
    kind: EntryType = (
        "directory"
        if stat.S_ISDIR(mode)
        else "file"
        if stat.S_ISREG(mode)
        else "link"
        if stat.S_ISLNK(mode)
        else "other"
    )
    size = status.st_size if kind == "file" else 0
    return Entry(name, kind, size, datetime.fromtimestamp(status.st_mtime, UTC))


def _refuse_root(path: StoragePath, action: str) -> None:
    if path.is_root:
        raise InvalidParametersError(f"cannot {action} the storage's root folder; name a file")


@contextlib.contextmanager
def _room_for(what: str) -> Iterator[None]:
    """A full file system (or quota) becomes the user's InsufficientStorageError."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise InsufficientStorageError(f"the storage has no room left for {what}") from None
        raise


def _copy(chunks: Iterable[bytes], file: BinaryIO) -> int:
    written = 0
    for chunk in chunks:
        file.write(chunk)
        written += len(chunk)
    file.flush()
    os.fsync(file.fileno())
    return written


def _chunks(file: BinaryIO) -> Iterator[bytes]:
    with file:
        while chunk := file.read(READ_CHUNK):
            yield chunk
