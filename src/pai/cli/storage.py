"""`pai storage`: the storages you may use and their files, without ssh; `pai audit`.

A place in a storage is written `STORAGE:PATH` (`team-data:runs/1/out.txt`); anything else is
a local path (write `./name:x` for a local file whose name has a colon).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from pai.cli.formatting import NONE, table, yes_no
from pai.cli.session import JsonOption, ServerOption, connect, err, out, print_json, read_secret
from pai.sdk import Client, InvalidArgumentError, NotFoundError
from pai.sdk.storage import Progress as ProgressCallback
from pai.sdk.storage import StorageQuota

storage_app = typer.Typer(
    name="storage",
    help="Storages you may use and their files: list, copy in and out, remove.",
    no_args_is_help=True,
)

_REMOTE = re.compile(r"^([a-z0-9](?:[-a-z0-9]*[a-z0-9])?):(.*)$", re.S)
PROGRESS_FROM_BYTES = 1024 * 1024
"""Transfers this large or larger show a progress bar (on a terminal)."""

StorageArgument = Annotated[str, typer.Argument(help="The storage's name.")]
RemoteArgument = Annotated[str, typer.Argument(help="STORAGE:PATH in a storage.")]
RecursiveOption = Annotated[
    bool, typer.Option("--recursive", "-r", help="A folder, with everything in it.")
]


@dataclass(frozen=True)
class Remote:
    storage: str
    path: str

    def child(self, name: str) -> Remote:
        return Remote(self.storage, f"{self.path.rstrip('/')}/{name}")

    def __str__(self) -> str:
        return f"{self.storage}:{self.path}"


def remote(value: str) -> Remote | None:
    """`value` as STORAGE:PATH, or None for a local path."""
    match = _REMOTE.match(value)
    return Remote(match[1], match[2]) if match else None


def required_remote(value: str) -> Remote:
    found = remote(value)
    if found is None:
        raise InvalidArgumentError(f"{value!r}: expected STORAGE:PATH (e.g. team-data:runs/1)")
    return found


# -- what you may use ---------------------------------------------------------------------------


@storage_app.command("list")
def list_storages(
    defaults: Annotated[
        bool, typer.Option("--default", help="Only your default storages.")
    ] = False,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the storages you may use, with the space they use where their kind reports it."""
    with connect(server) as client:
        found = client.storages(defaults_only=defaults)
    if as_json:
        print_json(found)
        return
    if not found:
        out().print("No storage is granted to you.", style="dim")
        return
    result = table("STORAGE", "TYPE", "SHARED", "DEFAULT", "READ-ONLY", "USED / LIMIT")
    for storage in found:
        result.add_row(
            storage.name,
            storage.type,
            yes_no(storage.share),
            yes_no(storage.default),
            yes_no(storage.read_only),
            _quota(storage.quota),
        )
    out().print(result)


@storage_app.command("show")
def show(name: StorageArgument, server: ServerOption = None, as_json: JsonOption = False) -> None:
    """Show a storage: where it lives and how jobs mount it."""
    with connect(server) as client:
        storage = client.storage(name)
    if as_json:
        print_json(storage)
        return
    result = table("FIELD", "VALUE")
    rows: tuple[tuple[str, str | Text], ...] = (
        ("name", storage.name),
        ("type", storage.type),
        ("description", storage.description or NONE),
        ("shared", yes_no(storage.share)),
        ("default", yes_no(storage.default)),
        ("read-only", yes_no(storage.read_only)),
        ("used / limit", _quota(storage.quota)),
        *((f"data.{key}", str(value)) for key, value in storage.data.items()),
    )
    for field, value in rows:
        result.add_row(field, value)
    out().print(result)


# -- files ----------------------------------------------------------------------------------------


@storage_app.command("ls")
def ls(
    where: Annotated[str, typer.Argument(help="STORAGE or STORAGE:PATH.")],
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """List a folder of a storage (or show one file)."""
    place = remote(where) or Remote(where, "")
    with connect(server) as client:
        listing = client.files(place.storage, place.path)
    if as_json:
        print_json(listing)
        return
    result = table("NAME", "TYPE", "SIZE", "MODIFIED")
    for entry in listing.entries:
        name = f"{entry.name}/" if entry.type == "directory" else entry.name
        modified = entry.modified.strftime("%Y-%m-%d %H:%M:%S") if entry.modified else NONE
        size = _bytes(entry.size) if entry.type == "file" else NONE
        result.add_row(name, entry.type, size, modified)
    out().print(result)


@storage_app.command("cp")
def cp(
    source: Annotated[str, typer.Argument(help="A local path or STORAGE:PATH.")],
    target: Annotated[str, typer.Argument(help="A local path or STORAGE:PATH.")],
    recursive: RecursiveOption = False,
    server: ServerOption = None,
) -> None:
    """Copy a file (or a folder, with -r) into a storage or out of one.

    Large uploads go in resumable pieces: run the same copy again after an interruption and
    it goes on from where it stopped.
    """
    source_remote, target_remote = remote(source), remote(target)
    if (source_remote is None) == (target_remote is None):
        raise InvalidArgumentError(
            "one of SOURCE and TARGET must be STORAGE:PATH and the other a local path"
        )
    with connect(server) as client:
        if target_remote is not None:
            count = _upload(client, Path(source), target_remote, recursive=recursive)
        else:
            assert source_remote is not None
            count = _download(client, source_remote, Path(target), recursive=recursive)
    err().print(f"Copied {count} file{'s' if count != 1 else ''}.")


@storage_app.command("rm")
def rm(
    where: RemoteArgument, recursive: RecursiveOption = False, server: ServerOption = None
) -> None:
    """Remove a file (or a folder and everything in it, with -r) from a storage."""
    place = required_remote(where)
    with connect(server) as client:
        removed = client.remove(place.storage, place.path, recursive=recursive)
    err().print(f"Removed {removed} file{'s' if removed != 1 else ''} from {place}.")


@storage_app.command("mkdir")
def mkdir(where: RemoteArgument, server: ServerOption = None) -> None:
    """Make a folder (and its parents) in a storage."""
    place = required_remote(where)
    with connect(server) as client:
        client.make_folder(place.storage, place.path)


# -- administrators -------------------------------------------------------------------------------


@storage_app.command("create")
def create(
    name: StorageArgument,
    kind: Annotated[str, typer.Option("--type", help="directory or s3.")] = "directory",
    path: Annotated[
        str | None, typer.Option("--path", help="directory: the same absolute path on every node.")
    ] = None,
    endpoint: Annotated[str | None, typer.Option("--endpoint", help="s3: the service URL.")] = None,
    bucket: Annotated[str | None, typer.Option("--bucket", help="s3: the bucket.")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="s3: a folder in the bucket.")] = "",
    region: Annotated[str, typer.Option("--region", help="s3: the region.")] = "us-east-1",
    access_key_id: Annotated[
        str | None, typer.Option("--access-key-id", help="s3: the access key id.")
    ] = None,
    description: Annotated[str, typer.Option("--description")] = "",
    unshared: Annotated[
        bool, typer.Option("--per-user", help="Each user sees only a folder of their own.")
    ] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Jobs and users only read.")
    ] = False,
    server: ServerOption = None,
) -> None:
    """Define a storage (administrators). The S3 secret key is asked for (or read from
    standard input), never taken from the command line."""
    if kind == "directory":
        if not path:
            raise InvalidArgumentError("--path: a directory storage needs its absolute path")
        data: dict[str, str] = {"path": path}
    elif kind == "s3":
        if not (endpoint and bucket and access_key_id):
            raise InvalidArgumentError(
                "--endpoint, --bucket and --access-key-id: an S3 storage needs all three"
            )
        data = {
            "endpoint": endpoint,
            "bucket": bucket,
            "prefix": prefix,
            "region": region,
            "accessKeyId": access_key_id,
            "secretAccessKey": read_secret("Secret access key"),
        }
    else:
        raise InvalidArgumentError(f"--type {kind!r}: expected directory or s3")
    with connect(server) as client:
        message = client.create_storage(
            name, kind, data, description=description, share=not unshared, read_only=read_only
        )
    err().print(message[:1].upper() + message[1:] + ".")


@storage_app.command("delete")
def delete(name: StorageArgument, server: ServerOption = None) -> None:
    """Forget a storage (administrators); its files stay where they are."""
    with connect(server) as client:
        message = client.delete_storage(name)
    err().print(message[:1].upper() + message[1:] + ".")


@storage_app.command("grant")
def grant(
    name: StorageArgument,
    group: Annotated[str, typer.Argument(help="The group whose members may use it.")],
    server: ServerOption = None,
) -> None:
    """Let a group's members use a storage (administrators)."""
    _change_grant(server, name, group, add=True)


@storage_app.command("revoke")
def revoke(
    name: StorageArgument,
    group: Annotated[str, typer.Argument(help="The group.")],
    server: ServerOption = None,
) -> None:
    """Stop a group from granting a storage (administrators)."""
    _change_grant(server, name, group, add=False)


def audit(
    kind: Annotated[
        str | None, typer.Option("--kind", help="storage, file or marketplace.")
    ] = None,
    target: Annotated[
        str | None,
        typer.Option("--target", help="A storage or item, `STORAGE:/path`, or a folder ending /."),
    ] = None,
    actor: Annotated[str | None, typer.Option("--user", help="Changes by this user.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Who changed which storage, file or marketplace item, and when (administrators)."""
    with connect(server) as client:
        events = client.audit(kind=kind, target=target, actor=actor, limit=limit)
    if as_json:
        print_json(events)
        return
    result = table("WHEN", "WHO", "ACTION", "KIND", "TARGET")
    for event in events:
        when = event.at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        result.add_row(when, event.actor, event.action, event.kind, event.target)
    out().print(result)


# -- helpers --------------------------------------------------------------------------------------


def _change_grant(server: str | None, name: str, group: str, *, add: bool) -> None:
    with connect(server) as client:
        current = client.group(group).storage_configs
        wanted = sorted({*current, name}) if add else [item for item in current if item != name]
        client.update_group(group, storage_configs=wanted)
    verb = "grants" if add else "no longer grants"
    err().print(f"Group {group} {verb} storage {name}.")


def _upload(client: Client, source: Path, target: Remote, *, recursive: bool) -> int:
    if source.is_dir():
        if not recursive:
            raise InvalidArgumentError(f"{source} is a folder: copy it with -r")
        count = 0
        for file in sorted(path for path in source.rglob("*") if path.is_file()):
            count += _upload(
                client, file, target.child(file.relative_to(source).as_posix()), recursive=False
            )
        return count
    if not source.is_file():
        raise InvalidArgumentError(f"{source}: no such file")
    destination = (
        target.child(source.name) if target.path.endswith("/") or not target.path else target
    )
    with _progress(f"{source.name} → {destination}", source.stat().st_size) as report:
        client.upload(destination.storage, destination.path, source, progress=report)
    return 1


def _is_folder(client: Client, place: Remote) -> bool:
    try:
        return client.files(place.storage, place.path).type == "directory"
    except NotFoundError:
        return False


def _download(client: Client, source: Remote, target: Path, *, recursive: bool) -> int:
    listing = client.files(source.storage, source.path)
    if listing.type == "directory":
        if not recursive:
            raise InvalidArgumentError(f"{source} is a folder: copy it with -r")
        target.mkdir(parents=True, exist_ok=True)
        return sum(
            _download(client, source.child(entry.name), target / entry.name, recursive=True)
            for entry in listing.entries
            if entry.type in ("file", "directory")
        )
    entry = listing.entries[0]
    destination = target / entry.name if target.is_dir() else target
    with _progress(f"{source} → {destination}", entry.size) as report:
        client.download(source.storage, source.path, destination, progress=report)
    return 1


@contextmanager
def _progress(label: str, size: int) -> Iterator[ProgressCallback | None]:
    """A progress bar on standard error for a large transfer on a terminal."""
    console = err()
    if size < PROGRESS_FROM_BYTES or not console.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(label, total=size)
        yield lambda done, total: bar.update(task, completed=done, total=total or size)


def _quota(quota: StorageQuota | None) -> str:
    if quota is None:
        return NONE
    return f"{_bytes(quota.used_bytes)} / {_bytes(quota.limit_bytes)}"


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
