"""The kinds of storage and what defines one.

- `directory`: a directory that every node (and the PAI server) sees at the same absolute
  path: a local disk on a one-machine installation, or an NFS/SMB share the administrator
  mounted at that path on every machine. Tasks get it bind-mounted at their mount path.
- `s3`: a bucket (or a prefix of one) of any S3-compatible service. Tasks get its address and
  credentials as variables; the server reads and writes it for the file API.

A definition has a location (shown to the storage's users) and, for S3, credentials, which
are sealed with the cluster key in the store and never shown again.
"""

from __future__ import annotations

import os
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

DIRECTORY = "directory"
S3 = "s3"
KINDS = (DIRECTORY, S3)
StorageKind = Literal["directory", "s3"]

STORAGE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A Kubernetes object name, as OpenPAI's storages are persistent volume claims."""
StorageName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=STORAGE_NAME_PATTERN)
]
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
DEFAULT_REGION = "us-east-1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class DirectoryLocation(_Strict):
    """Where a directory storage is on every node."""

    path: str = Field(description="Absolute path of the directory, the same on every node.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"must be an absolute path, got {path!r}")
        normal = "/" + os.path.normpath(path).lstrip("/")  # POSIX keeps a leading "//"
        if normal == "/":
            raise ValueError("cannot be the root directory")
        return normal


class S3Location(_Strict):
    """Where an S3 storage is: the service, the bucket and a prefix inside it."""

    endpoint: str = Field(description="The service's URL, e.g. https://s3.example.com:9000.")
    bucket: Annotated[str, StringConstraints(pattern=BUCKET_PATTERN)]
    prefix: str = Field(default="", description="Keys start with this folder (may be empty).")
    region: str = Field(default=DEFAULT_REGION, min_length=1, max_length=64)

    @field_validator("endpoint")
    @classmethod
    def _url(cls, endpoint: str) -> str:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"must be an http:// or https:// URL, got {endpoint!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("must be the service's address only (no path, query or fragment)")
        return f"{parts.scheme}://{parts.netloc}"

    @field_validator("prefix")
    @classmethod
    def _folder(cls, prefix: str) -> str:
        parts = [part for part in prefix.split("/") if part]
        if any(part in (".", "..") for part in parts):
            raise ValueError("cannot contain '.' or '..'")
        return "".join(f"{part}/" for part in parts)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


class S3Credentials(_Strict):
    access_key_id: str = Field(alias="accessKeyId", min_length=1, max_length=256)
    secret_access_key: str = Field(alias="secretAccessKey", min_length=1, max_length=256)
