"""The runtime plugins that let people into a running task: `ssh` and `tensorboard`.

`ssh` (OpenPAI's parameters: `jobssh`, `sshbarrier`, `sshbarrierTimeout`, `userssh`) gives the
task an SSH server (`pai.runtime.sshd`) that listens before the commands start; with `sshbarrier`
the commands also wait until every task of the job accepts connections. The task's supervisor
runs both on the node, outside the task, for a task on the host as for one in a container: the
task needs nothing of PAI (its user may not even reach PAI's Python), and sessions open inside
the task, as its user. Who may log in comes with the launch (`TaskAccess`): the job's key with
`jobssh`, the `userssh` key, and the public keys in the owner's profile.

`tensorboard` (`logdir: {name: path}`, `port`) runs TensorBoard beside the commands on the task's
`tensorboard` port (or its `http` port), under the task's proxy path, so the portal reaches it
at `/jobs/<job>/proxy/<role>/<index>/<port>/`.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pai.runtime.sshkeys import JobSshKeys, PublicKeyError, check_public_key

SSH_PARAMETERS = {"jobssh", "sshbarrier", "sshbarrierTimeout", "userssh"}
DEFAULT_BARRIER_MINUTES = 30
SSH_DIR = '"${PAI_WORK_DIR:-$PWD}/.pai-ssh"'
PROXY_PATH = (
    "/jobs/$PAI_JOB_NAME/proxy/$PAI_CURRENT_TASK_ROLE_NAME"
    "/$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"
)


class InteractivePluginError(ValueError):
    """A parameter of `ssh` or `tensorboard` is wrong; the message names it."""


@dataclass(frozen=True)
class TaskAccess:
    """Who may log in to the tasks of a job: its derived keys and its owner's public keys."""

    keys: JobSshKeys
    user_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class SshSettings:
    jobssh: bool
    barrier_seconds: float | None
    user_key: str | None


def check_ssh_parameters(parameters: Mapping[str, Any], where: str) -> SshSettings:
    unknown = sorted(set(parameters) - SSH_PARAMETERS)
    if unknown:
        raise InteractivePluginError(
            f"{where}: unknown parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(SSH_PARAMETERS))}"
        )
    jobssh = _flag(parameters, "jobssh", where)
    barrier = _flag(parameters, "sshbarrier", where)
    minutes = parameters.get("sshbarrierTimeout", DEFAULT_BARRIER_MINUTES)
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes <= 0:
        raise InteractivePluginError(
            f"{where}.sshbarrierTimeout: expected a positive number of minutes, got {minutes!r}"
        )
    if barrier and not jobssh:
        raise InteractivePluginError(f"{where}.sshbarrier: needs jobssh: true")
    user_key = None
    userssh = parameters.get("userssh")
    if userssh not in (None, {}):
        if not isinstance(userssh, Mapping) or userssh.get("type") != "custom":
            raise InteractivePluginError(
                f"{where}.userssh: expected {{type: custom, value: <public key>}}"
            )
        value = userssh.get("value")
        if value not in (None, ""):
            try:
                user_key = check_public_key(str(value), f"{where}.userssh.value")
            except PublicKeyError as exc:
                raise InteractivePluginError(str(exc)) from None
    return SshSettings(jobssh, minutes * 60 if barrier else None, user_key)


def ssh_server_keys(settings: SshSettings, access: TaskAccess) -> dict[str, Any]:
    """What the task's SSH server is given (on its standard input): its host key, the keys it
    lets in, and with `jobssh` the job's key, for ssh to the job's other tasks."""
    authorized = [*access.user_keys]
    if settings.user_key:
        authorized.append(settings.user_key)
    keys: dict[str, Any] = {
        "hostKey": access.keys.host.private,
        "hostPublicKey": access.keys.host.public,
        "authorizedKeys": authorized,
    }
    if settings.jobssh:
        keys["jobKey"] = access.keys.job.private
        authorized.append(access.keys.job.public)
    return keys


def ssh_commands() -> list[str]:
    """What the task's script does for `ssh`: the supervisor has started the SSH server (and
    waited for the barrier) before the script starts, so the script only puts the job's ssh
    client settings first on its PATH and takes the job's key away when it ends."""
    return [
        f"pai_ssh_dir={SSH_DIR}",
        # the job's private key leaves with the task
        "trap 'rm -rf \"$pai_ssh_dir\"' EXIT",
        'export PATH="$pai_ssh_dir/bin:$PATH"',
    ]


def check_tensorboard_parameters(
    parameters: Mapping[str, Any], where: str
) -> tuple[str, int | None]:
    """The `--logdir_spec` value and the port asked for (None: the task's own)."""
    logdir = parameters.get("logdir")
    if not isinstance(logdir, Mapping) or not logdir:
        raise InteractivePluginError(f"{where}.logdir: expected a mapping of names to paths")
    for name, path in logdir.items():
        if not isinstance(path, str) or not path or "," in str(name) + path or ":" in str(name):
            raise InteractivePluginError(
                f"{where}.logdir.{name}: expected a path without commas under a name without "
                f"colons, got {path!r}"
            )
    port = parameters.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise InteractivePluginError(f"{where}.port: expected a port number, got {port!r}")
    if port is not None and not 1 <= port <= 65535:
        raise InteractivePluginError(f"{where}.port: {port} is not a port number")
    spec = ",".join(f"{name}:{path}" for name, path in logdir.items())
    return spec, port


def tensorboard_commands(logdir_spec: str, port: int | None, *, in_container: bool) -> list[str]:
    """TensorBoard, run by the task as its own user: in a container, with the image's Python
    (which must have TensorBoard, as OpenPAI's plugin required); on the host, with PAI's Python
    where the task's user may run it (`pai[interactive]`), else with the `python3` on the task's
    PATH (a task user such as `nobody` cannot reach a Python installed under /root)."""
    chosen = (
        str(port)
        if port is not None
        else '"${PAI_CONTAINER_HOST_tensorboard_PORT_LIST:-$PAI_CONTAINER_HOST_PORT}"'
    )
    if in_container:
        choose = ["pai_tb_python=python3"]
        missing = "[pai] tensorboard plugin: the image's python3 has no TensorBoard"
    else:
        choose = [
            f"pai_tb_python={shlex.quote(sys.executable)}",
            '"$pai_tb_python" -c "import tensorboard" 2>/dev/null || pai_tb_python=python3',
        ]
        missing = (
            "[pai] tensorboard plugin: TensorBoard is not installed where the task's user can "
            "run it (pip install 'pai[interactive]' in PAI's Python, if that user may run it, "
            "or in the python3 on the task's PATH)"
        )
    return [
        f"pai_tb_port={chosen}",
        'pai_tb_port="${pai_tb_port%%,*}"',
        *choose,
        '"$pai_tb_python" -c "import tensorboard" 2>/dev/null || '
        f"{{ echo {shlex.quote(missing)} >&2; false; }}",
        f'"$pai_tb_python" -m tensorboard.main --logdir_spec {shlex.quote(logdir_spec)} '
        "--load_fast false "
        '--host "$PAI_CONTAINER_HOST_IP" --port "$pai_tb_port" '
        f'--path_prefix "{PROXY_PATH}/$pai_tb_port" '
        '>"${PAI_WORK_DIR:-$PWD}/tensorboard.log" 2>&1 &',
    ]


def _flag(parameters: Mapping[str, Any], name: str, where: str) -> bool:
    value = parameters.get(name, False)
    if not isinstance(value, bool):
        raise InteractivePluginError(f"{where}.{name}: expected true or false, got {value!r}")
    return value
