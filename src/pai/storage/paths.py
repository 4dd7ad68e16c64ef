"""Paths inside a storage, as users write them: relative to the storage's root, `/`-separated.

Whatever a user sends (an API path, a CLI argument, a form) goes through `storage_path`, which
refuses anything that could name a place outside the storage (`..`), so every backend can join
the parts to its root without checking again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pai.errors import InvalidParametersError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
RESERVED_NAME = ".pai-uploads"
"""Where a directory storage keeps uploads in progress; not a name users may use at the root."""


@dataclass(frozen=True)
class StoragePath:
    """A normalised path inside a storage; `parts` is empty for the root."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "/".join(self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> StoragePath:
        return StoragePath(self.parts[:-1])

    @property
    def is_root(self) -> bool:
        return not self.parts

    def child(self, name: str) -> StoragePath:
        return StoragePath((*self.parts, name))

    def __str__(self) -> str:
        return "/" + self.text


ROOT = StoragePath(())


def storage_path(raw: str, *, what: str = "path") -> StoragePath:
    """`raw` as a path inside a storage. Leading, trailing and repeated slashes are ignored;
    `.` and `..` are refused, as is a name longer than a file system allows."""
    if len(raw.encode()) > MAX_PATH_BYTES:
        raise InvalidParametersError(f"{what}: longer than {MAX_PATH_BYTES} bytes")
    parts = tuple(part for part in raw.split("/") if part)
    for part in parts:
        if part in (".", ".."):
            raise InvalidParametersError(
                f"{what} '{raw}': '{part}' is not allowed; paths start at the storage's root "
                "and cannot leave it"
            )
        if len(part.encode()) > MAX_NAME_BYTES:
            raise InvalidParametersError(
                f"{what} '{raw}': the name '{part[:40]}...' is longer than {MAX_NAME_BYTES} bytes"
            )
    if parts and parts[0] == RESERVED_NAME:
        raise InvalidParametersError(
            f"{what} '{raw}': '{RESERVED_NAME}' at the root is reserved for uploads in progress"
        )
    return StoragePath(parts)
