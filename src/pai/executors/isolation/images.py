"""Task images: their names as OpenPAI jobs write them, and pulling them onto the node.

OpenPAI ran tasks with Docker, so a job's `python:3.11` means Docker Hub's
`docker.io/library/python:3.11`; the name is made whole here before the runtime sees it (podman
would otherwise ask which registry was meant). A pull runs on a pseudo-terminal, where podman
draws its progress bars: their figures become the task's "pulling image" message.

Credentials from a job's `auth` reach the runtime in a file of the task's own state directory
(mode 600), which is removed after the pull: never on a command line, in a log or in the store.
An image the node has is used only by tasks that may pull it (`pullrecords`): the registry is
asked for its manifest, by digest, with the task's credentials, unless they pulled it here.
A refusal by the registry (no such image, wrong credentials) is permanent, one that cannot be
reached is transient: the task is retried.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import pty
import re
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

DOCKER_HUB = "docker.io"
AUTH_FILE = "registry-auth.json"
PULL_TIMEOUT = 3600.0
INSPECT_TIMEOUT = 60.0
PROGRESS_INTERVAL = 0.5
"""Seconds between two progress reports of one pull."""
_PROGRESS = re.compile(
    r"Copying blob (?P<blob>\w+)\s+\[[^\]]*\]\s+(?P<done>[\d.]+)(?P<done_unit>[KMGT]?i?B|b)"
    r"\s*/\s*(?P<total>[\d.]+)(?P<total_unit>[KMGT]?i?B|b)"
)
_UNITS = {"b": 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}
_REFUSALS = (
    "unauthorized",
    "authentication required",
    "denied",
    "manifest unknown",
    "name unknown",
    "not found",
    "invalid reference format",
    "repository name must",
    "no such image",
)
"""What a registry (or the runtime about a name) says when a retry cannot help."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class RegistryAuth:
    """A job's credentials for its image's registry (`auth` of a dockerimage prerequisite)."""

    username: str = ""
    password: str = field(default="", repr=False)
    registry: str = ""
    """The registry they are for; the image's own registry when empty."""

    def file_content(self, image: str) -> str:
        """The auth file (containers-auth.json) that gives the credentials to the runtime."""
        registry = self.registry or registry_of(image)
        registry = registry.removeprefix("https://").removeprefix("http://").split("/", 1)[0]
        if registry in ("index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"):
            registry = DOCKER_HUB
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return json.dumps({"auths": {registry: {"auth": token}}})

    def to_dict(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password, "registry": self.registry}


class PullFailed(Exception):
    """The image could not be pulled; `permanent` when the registry refused it."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


def full_name(image: str) -> str:
    """`image` with its registry, as Docker reads a name: `python:3.11` is
    `docker.io/library/python:3.11`, `me/app` is `docker.io/me/app`."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return image
    if not slash:
        return f"{DOCKER_HUB}/library/{image}"
    return f"{DOCKER_HUB}/{image}"


def registry_of(image: str) -> str:
    return full_name(image).split("/", 1)[0]


def by_digest(image: str, digest: str) -> str:
    """The name of `image`'s repository with `digest` in place of its tag."""
    repository = full_name(image).split("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return f"{repository}@{digest}"


def present_digest(runtime: str, image: str, env: Mapping[str, str]) -> str | None:
    """The digest of the manifest of `image` as this node has it; None when it lacks it."""
    try:
        shown = subprocess.run(
            [runtime, "image", "inspect", "--format", "{{.Digest}}", image],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=INSPECT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return None
    digest = shown.stdout.strip()
    return digest if shown.returncode == 0 and digest.startswith("sha256:") else None


def pulled_every_time(image: str) -> bool:
    """Whether the image is pulled even when the node has it: its tag is `latest`, written or
    implied (a digest never changes)."""
    name = full_name(image)
    if "@" in name:
        return False
    last = name.rsplit("/", 1)[-1]
    return ":" not in last or last.endswith(":latest")


@contextlib.contextmanager
def auth_file(directory: Path, image: str, auth: RegistryAuth | None) -> Iterator[Path | None]:
    """The credentials as a file only this user can read, for as long as the block runs."""
    if auth is None:
        yield None
        return
    path = directory / AUTH_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(auth.file_content(image))
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def pull_lock(locks_dir: Path, image: str) -> Iterator[None]:
    """One pull of an image at a time on a node: the tasks of a gang that need it wait for
    the first, then find it there."""
    locks_dir.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(image.encode()).hexdigest()[:32]
    with open(locks_dir / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pull(
    runtime: str,
    image: str,
    *,
    credentials: Path | None,
    env: Mapping[str, str],
    on_progress: Callable[[str], None],
) -> None:
    """Pull `image`, calling `on_progress` with a short message now and then; raises
    PullFailed with the runtime's own words."""
    command = [runtime, "pull"]
    if credentials is not None:
        command += ["--authfile", str(credentials)]
    leader, follower = pty.openpty()
    # Wide enough that a progress line is never cut short.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    try:
        process = subprocess.Popen(
            [*command, image],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=follower,
            env=dict(env),
            start_new_session=True,
        )
    finally:
        os.close(follower)
    output = _follow(leader, process, image, on_progress)
    if process.returncode != 0:
        raise _failure(image, output, process.returncode)


def _follow(
    leader: int,
    process: subprocess.Popen[bytes],
    image: str,
    on_progress: Callable[[str], None],
) -> str:
    """Everything the pull printed (without its terminal codes), reporting its progress."""
    blobs: dict[str, tuple[int, int]] = {}
    chunks = []
    pending = ""
    next_report = 0.0
    deadline = time.monotonic() + PULL_TIMEOUT
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the pull closed its terminal
                break
            if not data:
                break
            text = _ANSI.sub("", data.decode(errors="replace"))
            chunks.append(text)
            pending = (pending + text)[-4096:]
            for match in _PROGRESS.finditer(pending):
                blobs[match["blob"]] = (
                    _bytes(match["done"], match["done_unit"]),
                    _bytes(match["total"], match["total_unit"]),
                )
            if blobs and time.monotonic() >= next_report:
                next_report = time.monotonic() + PROGRESS_INTERVAL
                on_progress(_progress_message(image, blobs))
            if time.monotonic() > deadline:
                process.kill()
    finally:
        os.close(leader)
        process.wait()
    return "".join(chunks)


def _progress_message(image: str, blobs: Mapping[str, tuple[int, int]]) -> str:
    done = sum(part for part, _ in blobs.values())
    total = sum(whole for _, whole in blobs.values())
    return f"pulling image {image}: {_mib(done)} of {_mib(total)} MiB"


def _bytes(number: str, unit: str) -> int:
    return int(float(number) * _UNITS.get(unit, 1))


def _mib(amount: int) -> str:
    return f"{amount / 1024**2:.1f}"


def _failure(image: str, output: str, status: int) -> PullFailed:
    lines = [line.strip() for line in output.replace("\r", "\n").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]
    said = (errors or lines or [f"exit status {status}"])[-1]
    said = said.removeprefix("Error: ")
    permanent = any(refusal in said.lower() for refusal in _REFUSALS)
    return PullFailed(f"cannot pull image {image}: {said}", permanent=permanent)
