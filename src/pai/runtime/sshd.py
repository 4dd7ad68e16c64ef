"""The SSH server of a task of an ssh-enabled job.

The task's supervisor starts it on the node, outside the task, before the task's commands; it
listens on the task's `ssh` port at the task's host address and lets in only the keys it is
given (public-key authentication, nothing else). Machines need no sshd: the server is asyncssh's,
run with PAI's own Python, which the task itself need not be able to reach. Every session opens
inside the task:

- in a container (`python -m pai.runtime.sshd DIR --container RUNTIME NAME`), through the
  runtime's `exec`, with the container's environment and working directory: the image needs
  neither an SSH server nor Python;
- on the host (`python -m pai.runtime.sshd DIR --host PID [UID GID]`), in the namespaces of the
  task's process PID (its view of the node: PAI's home hidden, its storages mounted), as the
  task's user UID:GID when it has one, in its working directory, with its environment (given
  as `environment` with the keys).

It reads its keys as JSON on standard input (`hostKey`, `authorizedKeys`, and `jobKey` with
`jobssh`), so no key is ever on a command line. With a job key it writes, under DIR (mode 0700),
what an OpenSSH client needs to reach the job's other tasks by name (`ssh worker-1`): the key, a
client config, the known host entries, and a `bin/ssh` that uses that config; the plugin puts
`DIR/bin` first on the task's PATH; on the host they belong to the task's user. It touches
`DIR/ready` once it accepts connections.
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import functools
import json
import os
import pty
import shutil
import signal
import struct
import sys
import termios
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

READY_FILE = "ready"
JOB_KEY_FILE = "job_key"


def peers(env: Mapping[str, str]) -> Iterator[tuple[str, str, int]]:
    """(`<role>-<index>`, address, ssh port) of every task of the job the environment names."""
    for role in filter(None, env.get("PAI_TASK_ROLE_LIST", "").split(",")):
        for index in range(int(env.get(f"PAI_TASK_ROLE_TASK_COUNT_{role}", "0"))):
            address = env.get(f"PAI_HOST_IP_{role}_{index}")
            port = env.get(f"PAI_PORT_LIST_{role}_{index}_ssh", "").split(",")[0]
            if address and port:
                yield f"{role}-{index}", address, int(port)


@dataclass(frozen=True)
class Container:
    """Where sessions run when the task is in a container: the runtime and the container."""

    runtime: str
    name: str
    working_dir: str
    client_dir: str
    """Where the job's ssh client settings are (`bin/ssh` first on a session's PATH)."""

    def argv(self, arguments: list[str], *, terminal: str | None) -> list[str]:
        """The container's shell with `arguments`, on a terminal of its own when `terminal`
        names one."""
        options = ["--interactive", "--workdir", self.working_dir]
        if terminal:
            options += ["--tty", "--env", f"TERM={terminal}"]
        shell = ["/bin/sh", "-c", IN_CONTAINER_SHELL, "sh", f"{self.client_dir}/bin", *arguments]
        return [self.runtime, "exec", *options, self.name, *shell]


@dataclass(frozen=True)
class HostTask:
    """Where sessions run when the task is on the host: the namespaces of its process `pid`,
    as its user (`user`: uid and gid; None keeps this server's), in its working directory."""

    pid: int
    user: tuple[int, int] | None
    working_dir: str
    environment: Mapping[str, str]
    """The task's environment, which every session gets (the job's client settings first on
    its PATH)."""
    client_dir: str

    def env(self) -> dict[str, str]:
        env = dict(self.environment)
        env["PATH"] = f"{self.client_dir}/bin:{env.get('PATH', os.defpath)}"
        return env

    def enter(self) -> None:
        """In a session's process, before it runs the shell: the task's namespaces, then its
        user (no supplementary groups), then its working directory."""
        for kind, flag in (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS)):
            own = os.readlink(f"/proc/self/ns/{kind}")
            if os.readlink(f"/proc/{self.pid}/ns/{kind}") == own:
                continue
            descriptor = os.open(f"/proc/{self.pid}/ns/{kind}", os.O_RDONLY)
            try:
                if _LIBC.setns(descriptor, flag) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"cannot enter the task's {kind} namespace")
            finally:
                os.close(descriptor)
        if self.user is not None:
            uid, gid = self.user
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        os.chdir(self.working_dir)


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
_LIBC = ctypes.CDLL(None, use_errno=True)
"""Loaded here, not in a session's process between fork and exec."""


IN_CONTAINER_SHELL = (
    'PATH="$1:$PATH"; export PATH; shift; '
    'if command -v bash >/dev/null 2>&1; then exec bash "$@"; fi; exec sh "$@"'
)
"""Runs the container's bash (else sh) with the arguments after the first, which is put first
on the PATH."""
IN_CONTAINER_SSH = (
    "#!/bin/sh\n"
    "for client in /usr/bin/ssh /usr/local/bin/ssh /bin/ssh; do\n"
    '  [ -x "$client" ] && exec "$client" -F "{config}" "$@"\n'
    "done\n"
    'echo "ssh: the task\'s image has no ssh client" >&2\n'
    "exit 127\n"
)


def write_client_files(
    directory: Path,
    job_key: str,
    host_public: str,
    env: Mapping[str, str],
    *,
    in_container: bool = False,
) -> None:
    """The job key, known hosts and config with which `ssh <role>-<index>` reaches a peer
    (in a container, with the image's ssh client), for the task whose environment is `env`."""
    key_file = directory / JOB_KEY_FILE
    known_hosts = directory / "known_hosts"
    user = env.get("USER") or env.get("LOGNAME") or "pai"
    config_lines, host_lines = [], []
    for name, address, port in peers(env):
        host_lines.append(f"[{address}]:{port} {host_public}")
        config_lines += [
            f"Host {name}",
            f"  HostName {address}",
            f"  Port {port}",
            f"  User {user}",
            f"  IdentityFile {key_file}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {known_hosts}",
            "  StrictHostKeyChecking yes",
            "",
        ]
    _write_private(key_file, job_key)
    _write_private(known_hosts, "\n".join(host_lines) + "\n")
    _write_private(directory / "config", "\n".join(config_lines))
    config = directory / "config"
    if in_container:
        script = IN_CONTAINER_SSH.format(config=config)
    else:
        client = shutil.which("ssh", path=env.get("PATH"))
        if client is None:
            print("[pai] no ssh client on this machine: tasks reach each other only by IP")
            return
        script = f'#!/bin/sh\nexec {client} -F "{config}" "$@"\n'
    wrapper = directory / "bin" / "ssh"
    wrapper.parent.mkdir(mode=0o700, exist_ok=True)
    wrapper.write_text(script)
    wrapper.chmod(0o700)


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


async def run_session(
    process: asyncssh.SSHServerProcess[bytes], task: Container | HostTask
) -> None:
    """A shell, or the one command the client asked for, inside the task (see the module
    docstring)."""
    command = process.command
    arguments = ["-c", command] if command is not None else ["-i"]
    terminal = process.term_type
    enter: Callable[[], None] | None = None
    if isinstance(task, Container):
        env, argv = dict(os.environ), task.argv(arguments, terminal=terminal)
    else:
        env, enter = task.env(), task.enter
        shell = env.get("SHELL") or shutil.which("bash", path=env.get("PATH")) or "/bin/sh"
        argv = [shell, *arguments]
    if terminal:
        env["TERM"] = terminal
        status = await _run_in_terminal(process, argv, env, enter)
    else:
        child = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
            preexec_fn=enter,
        )
        assert child.stdout is not None and child.stderr is not None
        await process.redirect(stdin=child.stdin)
        # Output is copied here rather than redirected, so all of it is sent before the exit.
        await asyncio.gather(
            _copy(child.stdout, process.stdout), _copy(child.stderr, process.stderr)
        )
        status = await child.wait()
    process.exit(status if status >= 0 else 128 - status)


async def _copy(source: asyncio.StreamReader, target: asyncssh.SSHWriter[bytes]) -> None:
    while data := await source.read(65536):
        target.write(data)
        await target.drain()


async def _run_in_terminal(
    process: asyncssh.SSHServerProcess[bytes],
    argv: list[str],
    env: dict[str, str],
    enter: Callable[[], None] | None,
) -> int:
    """`argv` on a pseudo-terminal that is its controlling terminal, resized as the client's
    (after `enter`, when given, has put it inside the task)."""
    leader, follower = pty.openpty()
    _resize(follower, process.term_size)

    def start() -> None:
        _take_tty()
        if enter is not None:
            enter()

    child = await asyncio.create_subprocess_exec(
        *argv, stdin=follower, stdout=follower, stderr=follower, env=env, preexec_fn=start
    )
    os.close(follower)
    loop = asyncio.get_running_loop()
    output = asyncio.Event()

    def forward_output() -> None:
        try:
            data = os.read(leader, 65536)
        except OSError:
            data = b""
        if data:
            process.stdout.write(data)
        else:
            loop.remove_reader(leader)
            output.set()

    loop.add_reader(leader, forward_output)

    async def forward_input() -> None:
        while not process.stdin.at_eof():
            try:
                data = await process.stdin.read(65536)
            except asyncssh.TerminalSizeChanged as change:
                _resize(leader, (change.width, change.height, 0, 0))
                continue
            if data:
                os.write(leader, data)

    feeding = asyncio.create_task(forward_input())
    status = await child.wait()
    await output.wait()
    feeding.cancel()
    os.close(leader)
    return status


def _take_tty() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _resize(descriptor: int, size: tuple[int, int, int, int]) -> None:
    width, height = size[0], size[1]
    if width and height:
        fcntl.ioctl(descriptor, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


async def serve(directory: Path, keys: Mapping[str, Any], task: Container | HostTask) -> None:
    address = os.environ["PAI_CONTAINER_HOST_IP"]
    port = int(os.environ["PAI_CONTAINER_SSH_PORT"])
    lines = "\n".join(keys["authorizedKeys"])
    # No key at all (no jobssh, none in the profile yet) lets nobody in, and is no error.
    authorized = asyncssh.import_authorized_keys(lines) if lines else asyncssh.SSHAuthorizedKeys()
    server = await asyncssh.create_server(
        asyncssh.SSHServer,
        address,
        port,
        server_host_keys=[asyncssh.import_private_key(keys["hostKey"])],
        authorized_client_keys=authorized,
        process_factory=functools.partial(run_session, task=task),
        encoding=None,
        password_auth=False,
        kbdint_auth=False,
        x509_trusted_certs=None,
    )
    (directory / READY_FILE).touch()
    print(f"[pai] ssh server listening on {address}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


def main() -> None:
    arguments = sys.argv[1:]
    directory = Path(arguments[0])
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    (directory / READY_FILE).unlink(missing_ok=True)
    keys = json.loads(sys.stdin.read())
    task: Container | HostTask
    user: tuple[int, int] | None = None
    where = os.environ["PAI_WORK_DIR"]
    if arguments[1] == "--container":
        task = Container(arguments[2], arguments[3], where, str(directory))
    else:  # --host
        pid, *ids = (int(argument) for argument in arguments[2:5])
        user = (ids[0], ids[1]) if ids else None
        task = HostTask(pid, user, where, keys["environment"], str(directory))
    job_key = keys.get("jobKey")
    if job_key:
        write_client_files(
            directory,
            job_key,
            keys["hostPublicKey"],
            task.environment if isinstance(task, HostTask) else os.environ,
            in_container=isinstance(task, Container),
        )
    if user is not None:
        _give(directory, *user)
    asyncio.run(serve(directory, keys, task))


def _give(directory: Path, uid: int, gid: int) -> None:
    """`directory` and what is in it to the task's user: its client settings are its own."""
    for path in (directory, *directory.rglob("*")):
        os.chown(path, uid, gid, follow_symlinks=False)


if __name__ == "__main__":
    main()
