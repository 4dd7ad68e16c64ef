"""Which credentials pulled each image onto this node, so that a private image is used only by
jobs that may pull it.

An image a job pulled with its registry password stays on the node; a later task names it,
finds it there and would run it without asking the registry. On a shared cluster anyone who
learns the name of another team's private image could run it on a node where it was pulled.
As Kubernetes does since KEP-2535 ("ensure secret pulled images"), a present image is used for
a task only when one of these holds:

- the task's credentials are among those the image was pulled or checked with here;
- the task has none, and the image was never pulled with credentials here (a public image, or
  one the administrator put on the node), or was pulled or checked without any;
- the registry accepts the task's credentials (or no credentials) for the image's manifest now:
  `check` asks it, and the answer is remembered.

Credentials are remembered as an HMAC (SHA-256) under a key of this node's own (mode 600, in
the same directory), never in clear: the records tell only whether the same credentials were
seen before. Callers hold the image's pull lock while they read and write its record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

from pai.executors.isolation.images import RegistryAuth, registry_of

KEY_FILE = "key"
KEY_BYTES = 32


@dataclass
class _Record:
    credentials: list[str]
    """HMACs of the credentials that pulled the image or that its registry accepted for it."""
    anonymous: bool
    """Whether it was pulled, or its manifest read, without credentials."""
    private: bool
    """Whether credentials ever pulled it here (or the record cannot be read: ask)."""


class PullRecords:
    """The records of one node, in `directory` (one JSON file per image)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def allows(self, image: str, auth: RegistryAuth | None) -> bool:
        """Whether a task with `auth` may use `image` as the node has it, without asking the
        registry (see the module docstring)."""
        record = self._read(image)
        if auth is None:
            return record is None or record.anonymous or not record.private
        return record is not None and self._digest(image, auth) in record.credentials

    def remember(self, image: str, auth: RegistryAuth | None) -> None:
        """`auth` pulled `image`, or the registry accepted it for the image's manifest."""
        record = self._read(image) or _Record(credentials=[], anonymous=False, private=False)
        if auth is None:
            record.anonymous = True
        else:
            record.private = True
            digest = self._digest(image, auth)
            if digest not in record.credentials:
                record.credentials.append(digest)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(image)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({"image": image, **vars(record)}))
        partial.replace(path)

    def _read(self, image: str) -> _Record | None:
        try:
            data = json.loads(self._path(image).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return _Record(credentials=[], anonymous=False, private=True)  # ask the registry
        return _Record(
            list(data.get("credentials", [])), bool(data.get("anonymous")), bool(data["private"])
        )

    def _path(self, image: str) -> Path:
        return self.directory / f"{hashlib.sha256(image.encode()).hexdigest()[:32]}.json"

    def _digest(self, image: str, auth: RegistryAuth) -> str:
        registry = auth.registry or registry_of(image)
        message = "\0".join((registry, auth.username, auth.password)).encode()
        return hmac.new(self._key(), message, hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        """This node's key, made on first use: written whole under another name, then linked
        into place, so that tasks of other images starting at once all read the same one."""
        path = self.directory / KEY_FILE
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        self.directory.mkdir(parents=True, exist_ok=True)
        made = self.directory / f".{KEY_FILE}-{os.getpid()}-{os.urandom(4).hex()}"
        descriptor = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(os.urandom(KEY_BYTES))
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # another task made it first: use that one
        finally:
            made.unlink()
        return path.read_bytes()
