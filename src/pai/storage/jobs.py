"""The storages a job mounts: chosen and checked when it is submitted, handed to each task.

At submission (`attach_storages`) every storage named in `extras.storages` must exist and be
usable by the submitter, as OpenPAI checks; an empty list means the submitter's default
storages. What each storage is at that moment (its location, narrowed to the user's folder
when it is not shared, and its sealed credentials) is recorded with the job, so every launch
and retry of its tasks mounts the same thing whatever becomes of the storage.

At launch (`JobStorages.attach`) a task gets, for each storage:
- a directory storage: a bind mount at its mount path (`pai.executors.isolation.mounts`);
- an S3 storage: its address in variables, and its credentials exported by the task's script
  (which reaches the task through a pipe, never a file, like the job's own secrets).
`PAI_STORAGES` lists the names; `PAI_STORAGE_<NAME>` (upper case, `-` as `_`) is where the
task finds each: the mount path, or `s3://bucket/prefix/`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session

from pai.auth.permissions import Principal
from pai.errors import ForbiddenUserError, InvalidProtocolError, NoStorageError
from pai.executors.base import TaskLaunch
from pai.executors.isolation.mounts import Mount
from pai.protocol import field_problem
from pai.storage.access import Credentials, may_use, visible_storages
from pai.storage.kinds import DIRECTORY, S3Location
from pai.store import Database, storages
from pai.store.models import JobRow
from pai.store.sharing import JobStorageRow, StorageRow

DEFAULT_MOUNT_FOLDER = "/mnt"
KERNEL_FOLDERS = ("/proc", "/sys", "/dev")
"""Where a storage may not be mounted: the kernel's own file systems."""


def named_storages(spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The storages a rendered job names in `extras.storages` (None: it names none; an empty
    list: its submitter's default storages)."""
    wanted: list[dict[str, Any]] | None = (spec.get("extras") or {}).get("storages")
    return wanted


def attach_storages(session: Session, job: JobRow, caller: Principal, text: str | bytes) -> None:
    """Record the storages `job` mounts (see the module docstring); raises NoStorageError,
    ForbiddenUserError or InvalidProtocolError naming the entry and its line."""
    wanted = named_storages(job.spec)
    if wanted is None:
        return
    if not wanted:
        wanted = [
            {"name": row.name} for row in visible_storages(session, caller, defaults_only=True)
        ]
    mount_paths: dict[str, str] = {}
    for position, entry in enumerate(wanted):
        where = f"extras.storages.{position}"
        storage = _usable(session, caller, entry["name"], where, text)
        mount_path = _mount_path(entry.get("mountPath"), storage.name, where, text)
        if mount_path in mount_paths:
            raise _invalid(
                text,
                f"{where}.mountPath: {mount_path} is the mount path of storage "
                f"'{mount_paths[mount_path]}' already",
            )
        mount_paths[mount_path] = storage.name
        session.add(
            JobStorageRow(
                job_id=job.id,
                position=position,
                name=storage.name,
                mount_path=mount_path,
                kind=storage.kind,
                read_only=storage.read_only,
                location=_location_for(storage, caller.username),
                sealed_credentials=storage.sealed_credentials,
            )
        )


@dataclass(frozen=True)
class TaskStorages:
    """What a task gets from its job's storages."""

    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    exports: str = ""
    """Script lines that export the credentials."""

    def attach(self, launch: TaskLaunch) -> TaskLaunch:
        if not self.env:
            return launch
        return replace(
            launch,
            mounts=self.mounts,
            env={**launch.env, **self.env},
            script=self.exports + launch.script,
        )


class JobStorages:
    """Reads the storages recorded with a job when its tasks launch."""

    def __init__(self, database: Database, credentials: Credentials) -> None:
        self._database = database
        self._credentials = credentials

    def of_job(self, job_id: int) -> TaskStorages:
        """What each task of job `job_id` gets from its storages (read once for all of them)."""
        with self._database.reading() as session:
            rows = storages.job_storages(session, job_id)
        return task_storages(rows, self._credentials)


def task_storages(rows: Sequence[JobStorageRow], credentials: Credentials) -> TaskStorages:
    mounts: list[Mount] = []
    env: dict[str, str] = {}
    exports: list[tuple[str, str]] = []
    s3_rows = [row for row in rows if row.kind != DIRECTORY]
    for row in rows:
        variable = storage_variable(row.name)
        if row.kind == DIRECTORY:
            mounts.append(
                Mount(
                    source=row.location["path"],
                    target=row.mount_path,
                    read_only=row.read_only,
                    create_source=bool(row.location.get("create")),
                )
            )
            env[variable] = row.mount_path
            continue
        location = S3Location.model_validate(row.location)
        keys = credentials.open(row.sealed_credentials)
        env[variable] = location.uri
        env[f"{variable}_ENDPOINT"] = location.endpoint
        env[f"{variable}_REGION"] = location.region
        exports += [
            (f"{variable}_ACCESS_KEY_ID", keys.access_key_id),
            (f"{variable}_SECRET_ACCESS_KEY", keys.secret_access_key),
        ]
        if len(s3_rows) == 1:  # what S3 tools read by themselves
            env["AWS_ENDPOINT_URL"] = location.endpoint
            env["AWS_DEFAULT_REGION"] = location.region
            exports += [
                ("AWS_ACCESS_KEY_ID", keys.access_key_id),
                ("AWS_SECRET_ACCESS_KEY", keys.secret_access_key),
            ]
    if rows:
        env["PAI_STORAGES"] = ",".join(row.name for row in rows)
    script = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in exports)
    return TaskStorages(tuple(mounts), env, script)


def storage_variable(name: str) -> str:
    """`PAI_STORAGE_TEAM_DATA` for storage `team-data`."""
    return "PAI_STORAGE_" + name.upper().replace("-", "_")


def _usable(
    session: Session, caller: Principal, name: Any, where: str, text: str | bytes
) -> StorageRow:
    storage = storages.find_storage(session, name) if isinstance(name, str) else None
    if storage is None:
        raise NoStorageError(_located(text, f"{where}.name: storage '{name}' does not exist"))
    if not may_use(caller, storage.name):
        raise ForbiddenUserError(
            _located(
                text,
                f"{where}.name: user '{caller.username}' may not use storage '{name}': none "
                "of the user's groups grants it (ask an administrator)",
            )
        )
    return storage


def _mount_path(raw: Any, name: str, where: str, text: str | bytes) -> str:
    if raw is None:
        return f"{DEFAULT_MOUNT_FOLDER}/{name}"
    problem = None
    if not isinstance(raw, str) or not raw.startswith("/"):
        problem = f"must be an absolute path, got {raw!r}"
    elif os.path.normpath(raw) != raw.rstrip("/") or "//" in raw:
        problem = f"{raw!r} must be written plainly (no '.', '..' or repeated '/')"
    elif raw.rstrip("/") == "":
        problem = "cannot be the root folder"
    elif any(raw == top or raw.startswith(top + "/") for top in KERNEL_FOLDERS):
        problem = f"{raw} is inside a file system of the kernel ({', '.join(KERNEL_FOLDERS)})"
    if problem is not None:
        raise _invalid(text, f"{where}.mountPath: {problem}")
    return raw.rstrip("/")


def _location_for(storage: StorageRow, username: str) -> dict[str, Any]:
    """The storage's location as the user's jobs see it: their own folder when not shared."""
    location = dict(storage.location)
    if storage.share:
        return location
    if storage.kind == DIRECTORY:
        return {"path": os.path.join(location["path"], username), "create": True}
    return {**location, "prefix": f"{location['prefix']}{username}/"}


def _located(text: str | bytes, problem: str) -> str:
    """`problem` with the line of the field it starts with, when the text has it."""
    located = field_problem(text, problem)
    return f"line {located.line}: {problem}" if located and located.line else problem


def _invalid(text: str | bytes, problem: str) -> InvalidProtocolError:
    located = field_problem(text, problem)
    problems = [asdict(located)] if located else []
    return InvalidProtocolError(_located(text, problem), problems=problems)
