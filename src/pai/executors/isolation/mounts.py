"""Storages bind-mounted where a task expects them, in a mount namespace of the task's own.

The supervisor starts a host task that mounts storages (or whose view of PAI's home is hidden)
as

    python -m pai.executors.isolation.mounts REPORT_FD REQUEST_JSON -- bash /dev/fd/N

This process enters a new mount namespace (after a user namespace when it is not root, which
gives it the right to mount there and nowhere else), makes every bind mount, and then execs
the command, which keeps its pid: the supervisor watches, signals and reaps it as any task.
The mounts exist only in the task's namespace, so two tasks on one node can each have a
different storage at `/mnt/data`, and nothing is left on the node when the task ends.

A mount point that does not exist is made visible to the task alone: its nearest existing
parent (say `/mnt`) is covered by a private tmpfs holding the parent's entries, each bound back
in place, plus the new mount point. Only a mount point directly under `/` is created on the
node itself.

A host task that runs as an unprivileged user while PAI runs as root also gets a `hide`
directory: the nearest folder above PAI's state that the user could not pass (or PAI's home
itself), covered by an empty tmpfs before the mounts are made, so that the task's own
directories, bound back at their paths, are all it sees of it. Then this process becomes that
user (no supplementary groups but those that open the task's device nodes) and execs the
command.

The outcome reaches the supervisor through REPORT_FD, which is closed on exec: the supervisor
reads nothing when every mount was made, and `transient: why` or `permanent: why` when one
failed (then this process exits without running the command).
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
ST_RELATIME = 0x1000
_KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME
"""Flags of the mount under a bind mount that a remount must repeat (in a user namespace the
kernel refuses to drop them)."""
TRANSIENT = "transient"
PERMANENT = "permanent"
PYTHONPATH = "PYTHONPATH"


@dataclass(frozen=True)
class Mount:
    """`source` (a directory of the node) appears at `target` in the task's view."""

    source: str
    target: str
    read_only: bool = False
    create_source: bool = False
    """Make `source` when missing (a user's own folder of a storage that is not shared)."""


class MountFailed(Exception):
    """A mount could not be made; `transient` when another node or a later try may work."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def mount_command(
    mounts: Sequence[Mount],
    report_fd: int,
    env: dict[str, str],
    *,
    hide: str | None = None,
    user: tuple[int, int] | None = None,
    groups: Sequence[int] = (),
) -> tuple[list[str], dict[str, str]]:
    """The argv prefix that runs a command with `mounts` made under a hidden `hide`, as
    `user` (uid, gid) when given (see the module docstring), and the environment to start it
    with: the command's `env`, plus what this process needs to import PAI, which it takes
    away again before the command runs."""
    request = {
        "mounts": [asdict(mount) for mount in mounts],
        "pythonpath": env.get(PYTHONPATH),
        "hide": hide,
        "user": list(user) if user else None,
        "groups": list(groups),
    }
    argv = [
        sys.executable,
        "-m",
        "pai.executors.isolation.mounts",
        str(report_fd),
        json.dumps(request),
    ]
    own = os.environ.get(PYTHONPATH)
    return [*argv, "--"], {**env, PYTHONPATH: own} if own is not None else env


def read_report(report_fd: int) -> MountFailed | None:
    """What the mounting process reported on `report_fd` (which this closes): None when the
    command was started with every mount made."""
    with os.fdopen(report_fd, "rb") as report:
        text = report.read().decode(errors="replace").strip()
    if not text:
        return None
    kind, _, message = text.partition(": ")
    return MountFailed(message or text, transient=kind == TRANSIENT)


def make_mounts(mounts: Sequence[Mount], hide: str | None = None) -> None:
    """Enter a private mount namespace, cover `hide` with an empty tmpfs, and make `mounts`,
    parents before children (their sources are opened first: they may lie under `hide`)."""
    ordered = sorted(mounts, key=lambda mount: Path(mount.target).parts)
    _enter_namespace()
    sources = [_open_source(mount) for mount in ordered]  # in the namespace: to be bound
    shadowed: set[Path] = set()
    if hide is not None:
        _mount("tmpfs", Path(hide), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
        shadowed.add(Path(hide))  # mount points under it are made in the tmpfs
    for mount, source in zip(ordered, sources, strict=True):
        target = Path(mount.target)
        _make_mount_point(target, shadowed)
        _mount(f"/proc/self/fd/{source}", target, None, MS_BIND | MS_REC)
        if mount.read_only:
            kept = _kept_flags(target)
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def prepare_source(mount: Mount) -> Path:
    """The mount's source folder, made first when asked; a missing one is a transient failure
    (another node, or a later try, may have it)."""
    source = Path(mount.source)
    if mount.create_source:
        try:
            source.mkdir(mode=0o755, exist_ok=True)
        except OSError as error:
            raise MountFailed(
                f"cannot make the folder {source}: {error.strerror}", transient=True
            ) from None
    if not source.is_dir():
        raise MountFailed(
            f"the storage's directory {source} does not exist on this node; the "
            "administrator must mount it on every node",
            transient=True,
        )
    return source


def _open_source(mount: Mount) -> int:
    """A descriptor of the mount's source folder (made first when asked)."""
    return os.open(prepare_source(mount), os.O_PATH | os.O_DIRECTORY)


def _become(uid: int, gid: int, groups: Sequence[int] = ()) -> None:
    """Drop every privilege for the user `uid`: no supplementary groups but `groups` (those
    that open the task's device nodes), no way back."""
    os.setgroups(list(groups))
    os.setgid(gid)
    os.setuid(uid)


def _enter_namespace() -> None:
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        _unshare(CLONE_NEWNS)
    else:
        _unshare(CLONE_NEWUSER | CLONE_NEWNS)
        # Map the user to itself: the task keeps its identity, and only this process gains
        # the right to mount, which it loses when it execs the command.
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, Path("/"), None, MS_REC | MS_PRIVATE)  # nothing leaks back to the node


def _make_mount_point(target: Path, shadowed: set[Path]) -> None:
    if target.is_dir():
        return
    if target.exists() or target.is_symlink():
        raise MountFailed(f"the mount path {target} exists and is not a folder", transient=False)
    parent = next(folder for folder in target.parents if folder.is_dir())
    if parent != Path("/") and parent not in shadowed and not _on_shadow(parent, shadowed):
        _shadow(parent)
        shadowed.add(parent)
    try:
        target.mkdir(mode=0o755, parents=True)
    except OSError as error:
        raise MountFailed(
            f"cannot make the mount path {target}: {error.strerror}; choose a mount path "
            "under an existing folder such as /mnt",
            transient=False,
        ) from None


def _on_shadow(folder: Path, shadowed: set[Path]) -> bool:
    return any(folder.is_relative_to(top) for top in shadowed)


def _shadow(folder: Path) -> None:
    """Cover `folder` with a tmpfs that shows the same entries (each bound back in place),
    where new mount points can be made without touching the node."""
    original = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    names = os.listdir(folder)
    mode = stat.S_IMODE(os.stat(folder).st_mode)
    _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode:o}")
    for name in names:
        source = f"/proc/self/fd/{original}/{name}"
        place = folder / name
        status = os.lstat(source)
        if stat.S_ISLNK(status.st_mode):
            place.symlink_to(os.readlink(source))
            continue
        if stat.S_ISDIR(status.st_mode):
            place.mkdir()
        else:
            place.touch()
        _mount(source, place, None, MS_BIND | MS_REC)


def _kept_flags(target: Path) -> int:
    flags = os.statvfs(target).f_flag
    kept = flags & _KEPT_FLAGS
    return kept | (MS_RELATIME if flags & ST_RELATIME else 0)


_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise MountFailed(
            f"cannot make a mount namespace for the task: {os.strerror(error)} (PAI needs root, "
            "or unprivileged user namespaces, to mount storages)",
            transient=False,
        )


def _mount(
    source: str | None, target: Path, fstype: str | None, flags: int, data: str | None = None
) -> None:
    encoded = [value.encode() if value is not None else None for value in (source, fstype, data)]
    result = _libc.mount(encoded[0], str(target).encode(), encoded[1], flags, encoded[2])
    if result != 0:
        error = ctypes.get_errno()
        raise MountFailed(
            f"cannot mount {source or target} at {target}: {os.strerror(error)}",
            transient=False,
        )


def main(argv: Sequence[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(
            "usage: python -m pai.executors.isolation.mounts REPORT_FD REQUEST_JSON -- COMMAND..."
        )
        return 2
    report_fd = int(argv[0])
    os.set_inheritable(report_fd, False)  # closed by the exec: the supervisor then reads EOF
    request = json.loads(argv[1])
    try:
        make_mounts([Mount(**entry) for entry in request["mounts"]], request.get("hide"))
        if request.get("user"):
            uid, gid = request["user"]
            _become(uid, gid, request.get("groups") or ())
    except MountFailed as failed:
        kind = TRANSIENT if failed.transient else PERMANENT
        os.write(report_fd, f"{kind}: {failed}".encode())
        return 1
    if request["pythonpath"] is None:
        os.environ.pop(PYTHONPATH, None)
    else:
        os.environ[PYTHONPATH] = request["pythonpath"]
    command = list(argv[3:])
    try:
        os.execvp(command[0], command)
    except OSError as error:
        os.write(report_fd, f"{PERMANENT}: cannot run {command[0]}: {error.strerror}".encode())
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
