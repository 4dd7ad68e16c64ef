"""`pai ssh`: a shell or one command in a task of an ssh-enabled job; `pai sshkey`: the public
keys in your profile, which such jobs let in.

`pai ssh` runs OpenSSH's client against the task's SSH server, trusting only the host key the
platform reports for the job (so no known_hosts entry goes stale as ports are reused), and exits
with the remote command's exit code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from pai.cli.formatting import table, timestamp
from pai.cli.session import JsonOption, ServerOption, connect, err, out, print_json

sshkey_app = typer.Typer(
    name="sshkey", help="The SSH public keys in your profile.", no_args_is_help=True
)


def ssh(
    words: Annotated[
        list[str],
        typer.Argument(
            help="JOB [ROLE [INDEX]], then `--` and a command to run instead of a shell.",
            metavar="JOB [ROLE [INDEX]] [-- COMMAND...]",
            show_default=False,
        ),
    ],
    identity: Annotated[
        Path | None,
        typer.Option("--identity", "-i", help="Your private key (default: ssh's own choice)."),
    ] = None,
    server: ServerOption = None,
) -> None:
    """Open a shell in a task of an ssh-enabled job, or run one command there."""
    target, command = _split_command(words)
    if not 1 <= len(target) <= 3:
        raise typer.BadParameter("give JOB [ROLE [INDEX]], then optionally -- COMMAND")
    name, role = target[0], target[1] if len(target) > 1 else None
    index = _index(target[2]) if len(target) > 2 else 0
    client_path = shutil.which("ssh")
    if client_path is None:
        err().print("pai ssh needs OpenSSH's client (ssh) on this machine")
        raise typer.Exit(1)
    with connect(server) as client:
        info = client.ssh_info(name)
        user = client.username or "pai"
    try:
        task = info.container(role, index)
    except LookupError as missing:
        err().print(f"job {name}: {missing}")
        raise typer.Exit(1) from None
    with tempfile.TemporaryDirectory(prefix="pai-ssh-") as directory:
        known_hosts = Path(directory) / "known_hosts"
        known_hosts.write_text(f"[{task.sshIp}]:{task.sshPort} {info.hostPublicKey}\n")
        argv = [
            client_path,
            "-p",
            task.sshPort,
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes" if command else "BatchMode=no",
        ]
        if identity is not None:
            argv += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
        argv.append(f"{user}@{task.sshIp}")
        if command:
            argv += ["--", " ".join(command)]  # as ssh joins them: the remote shell splits
        code = subprocess.call(argv)
    raise typer.Exit(code)


def _split_command(words: list[str]) -> tuple[list[str], list[str]]:
    """What comes before and after `--`. Click drops the `--` itself, so where it stood is
    read from the process's arguments."""
    argv = sys.argv[1:]
    if "--" not in argv:
        return words, []
    after = len(argv) - argv.index("--") - 1
    return words[: len(words) - after], words[len(words) - after :]


def _index(text: str) -> int:
    if not text.isdigit():
        raise typer.BadParameter(f"INDEX must be a task index (0, 1, ...), got {text!r}")
    return int(text)


def list_interactive_jobs(
    server: str | None, users: list[str], *, idle: bool, as_json: bool
) -> None:
    """`pai jobs --interactive [--idle]`: the jobs people work in, and how long each idled."""
    with connect(server) as client:
        asked: list[str | None] = [*users] or [None]
        found = [job for user in asked for job in client.interactive_jobs(user, idle=idle)]
    if as_json:
        print_json(found)
        return
    if not found:
        out().print("No idle interactive jobs." if idle else "No interactive jobs.", style="dim")
        return
    result = table("JOB", "VC", "PLUGINS", "STARTED", "IDLE FOR")
    for job in found:
        result.add_row(
            job.name,
            job.virtualCluster,
            ", ".join(job.plugins),
            timestamp(job.launchedTime),
            "busy" if job.idleSeconds is None else _span(job.idleSeconds),
        )
    out().print(result)


def _span(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min {rest % 60} s"


@sshkey_app.command("list")
def list_keys(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """List the public keys in your profile."""
    with connect(server) as client:
        keys = client.ssh_keys()
    if as_json:
        print_json(keys)
        return
    result = table("TITLE", "FINGERPRINT", "ADDED")
    for key in keys:
        result.add_row(key.title, key.fingerprint, timestamp(key.time))
    out().print(result)


@sshkey_app.command("add")
def add_key(
    title: Annotated[str, typer.Argument(help="A name for the key (letters, digits, ._@-).")],
    public_key: Annotated[
        Path, typer.Argument(help="The public key file, e.g. ~/.ssh/id_ed25519.pub.")
    ],
    server: ServerOption = None,
) -> None:
    """Add a public key: ssh-enabled jobs started from now on let it in."""
    try:
        value = public_key.expanduser().read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {public_key}: {exc.strerror}") from None
    with connect(server) as client:
        key = client.add_ssh_key(title, value)
    out().print(f"added SSH key '{key.title}' ({key.fingerprint})")


@sshkey_app.command("remove")
def remove_key(
    title: Annotated[str, typer.Argument(help="The title of the key.")],
    server: ServerOption = None,
) -> None:
    """Remove a public key from your profile."""
    with connect(server) as client:
        client.remove_ssh_key(title)
    out().print(f"removed SSH key '{title}'")
