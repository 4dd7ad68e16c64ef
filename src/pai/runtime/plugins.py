"""Runtime plugins and the final script a task runs.

OpenPAI's runtime wraps the user's commands with what its plugins contribute. Supported: `cmd`
(preCommands/postCommands, or callbacks on taskStarts/taskSucceeds), `git` (clone a repository
before the commands), and `ssh` and `tensorboard` (`pai.runtime.interactive`). The result is one
bash script:

    each plugin's pre-commands, in order
    the task role's commands (in a subshell, so an `exit` there still reaches what follows)
    on success, each plugin's post-commands, in reverse order (set up first, torn down last)

A plugin's `failurePolicy: fail` (the default) makes its first failing command end the task with
that command's exit code; `ignore` reports the failure on stderr and carries on. Secrets are
substituted here, when the script is built for a launch, and nowhere earlier: the script goes to
the executor and is never stored.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pai.protocol import (
    JobSpec,
    RuntimePlugin,
    render_commands,
    runtime_plugins_for_role,
    substitute_secrets,
)
from pai.protocol.prerequisites import FailurePolicy
from pai.runtime.interactive import (
    InteractivePluginError,
    SshSettings,
    TaskAccess,
    check_ssh_parameters,
    check_tensorboard_parameters,
    ssh_commands,
    ssh_server_keys,
    tensorboard_commands,
)

COMMANDS_OPENING = "# the task role's commands\n("
COMMANDS_CLOSING = ")\npai_exit_code=$?"
"""What encloses the role's commands in a task script (the hollow engine reads them out)."""
DEFAULT_GIT_CLONE_DIR = '"${PAI_WORK_DIR:-$PWD}/code"'


class PluginError(ValueError):
    """A runtime plugin is unknown or misconfigured; the message names the plugin and field."""


@dataclass(frozen=True)
class PluginCommands:
    """What one plugin adds before and after the task role's commands."""

    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()


def cmd_plugin(parameters: Mapping[str, Any], where: str) -> PluginCommands:
    """preCommands/postCommands, or callbacks (taskStarts before, taskSucceeds after)."""
    if "callbacks" in parameters:
        if "preCommands" in parameters or "postCommands" in parameters:
            raise PluginError(f"{where}: use either callbacks or preCommands/postCommands")
        pre: list[str] = []
        post: list[str] = []
        for index, callback in enumerate(_list(parameters, "callbacks", where)):
            path = f"{where}.callbacks[{index}]"
            if not isinstance(callback, Mapping):
                raise PluginError(f"{path}: expected a mapping with 'event' and 'commands'")
            event = callback.get("event")
            target = {"taskStarts": pre, "taskSucceeds": post}.get(str(event))
            if target is None:
                raise PluginError(
                    f"{path}.event: expected taskStarts or taskSucceeds, got {event!r}"
                )
            target.extend(_strings(callback, "commands", path))
        return PluginCommands(tuple(pre), tuple(post))
    return PluginCommands(
        tuple(_strings(parameters, "preCommands", where)),
        tuple(_strings(parameters, "postCommands", where)),
    )


def git_plugin(parameters: Mapping[str, Any], where: str) -> PluginCommands:
    """Clone `repo_uri` with `options` into `clone_dir`, which must be missing or empty."""
    repo = parameters.get("repo_uri")
    if not isinstance(repo, str) or not repo:
        raise PluginError(f"{where}.repo_uri: a repository URI is required")
    clone_dir = parameters.get("clone_dir")
    if clone_dir is not None and not isinstance(clone_dir, str):
        raise PluginError(f"{where}.clone_dir: expected a path, got {clone_dir!r}")
    options = [
        word for option in _strings(parameters, "options", where) for word in _split(option, where)
    ]
    target = shlex.quote(clone_dir) if clone_dir else DEFAULT_GIT_CLONE_DIR
    return PluginCommands(
        pre=(
            f"pai_clone_dir={target}",
            'if [ -n "$(ls -A "$pai_clone_dir" 2>/dev/null)" ]; then '
            'echo "[pai] git plugin: clone_dir $pai_clone_dir is not empty" >&2; false; fi',
            shlex.join(["git", "clone", *options, "--", repo]) + ' "$pai_clone_dir"',
        )
    )


def ssh_plugin(parameters: Mapping[str, Any], where: str) -> PluginCommands:
    """The job's ssh client settings for the task (its SSH server is the supervisor's to run,
    `ssh_server_for_role`)."""
    _ssh_settings(parameters, where)
    return PluginCommands(tuple(ssh_commands()))


def tensorboard_plugin(
    parameters: Mapping[str, Any], where: str, *, in_container: bool = False
) -> PluginCommands:
    """TensorBoard in the background, reachable through the task's proxy path."""
    try:
        logdir_spec, port = check_tensorboard_parameters(parameters, where)
    except InteractivePluginError as exc:
        raise PluginError(str(exc)) from None
    return PluginCommands(tuple(tensorboard_commands(logdir_spec, port, in_container=in_container)))


def _ssh_settings(parameters: Mapping[str, Any], where: str) -> SshSettings:
    try:
        return check_ssh_parameters(parameters, where)
    except InteractivePluginError as exc:
        raise PluginError(str(exc)) from None


PluginBuilder = Callable[[Mapping[str, Any], str], PluginCommands]

PLUGINS: Mapping[str, PluginBuilder] = {
    "cmd": cmd_plugin,
    "git": git_plugin,
    "ssh": ssh_plugin,
    "tensorboard": tensorboard_plugin,
}


def task_script_for_role(spec: JobSpec, role: str, *, in_container: bool = False) -> str:
    """The script a task of `role` runs, built when it is launched (it holds the secrets)."""
    return build_task_script(
        render_commands(spec, role),
        runtime_plugins_for_role(spec, role),
        spec.secrets,
        in_container=in_container,
    )


def ssh_server_for_role(spec: JobSpec, role: str, access: TaskAccess | None) -> str | None:
    """What the SSH server that a task of `role` gets on its node is given (keys, barrier), as
    JSON; None when the role has no `ssh` plugin."""
    for number, config in enumerate(runtime_plugins_for_role(spec, role), start=1):
        if config.plugin != "ssh" or access is None:
            continue
        where = f"runtime plugin #{number} (ssh).parameters"
        settings = _ssh_settings(_substitute(config.parameters, spec.secrets), where)
        request = {
            "keys": ssh_server_keys(settings, access),
            "barrier_seconds": settings.barrier_seconds,
        }
        return json.dumps(request)
    return None


def build_task_script(
    commands: Sequence[str],
    plugins: Sequence[RuntimePlugin],
    secrets: Mapping[str, Any] | None = None,
    *,
    in_container: bool = False,
) -> str:
    """The bash script of one task: plugins around the role's rendered commands, secrets in.

    `commands` are the role's commands as rendered at submission (`pai.protocol.render_commands`)
    and `plugins` the role's runtime plugins (`pai.protocol.runtime_plugins_for_role`);
    `in_container`, whether the script runs in the task's image (then tools of the node are
    not at hand).
    """
    secrets = secrets or {}
    builders: dict[str, PluginBuilder] = {
        **PLUGINS,
        "tensorboard": partial(tensorboard_plugin, in_container=in_container),
    }
    sections = [
        "# Task script generated by PAI: runtime plugins' pre-commands, the task role's",
        "# commands, then (if they succeeded) the plugins' post-commands.",
    ]
    contributions = []
    for number, config in enumerate(plugins, start=1):
        where = f"runtime plugin #{number} ({config.plugin}).parameters"
        build = builders.get(config.plugin)
        if build is None:
            raise PluginError(
                f"runtime plugin #{number}: {config.plugin!r} is not supported here; "
                f"supported: {', '.join(sorted(PLUGINS))}"
            )
        build(config.parameters, where)  # checked as written, so no error shows a secret
        added = build(_substitute(config.parameters, secrets), where)
        contributions.append((number, config.plugin, config.failure_policy, added))
    for number, name, policy, added in contributions:
        sections += _guarded(added.pre, f"runtime plugin #{number} ({name}) pre-commands", policy)
    sections += [
        COMMANDS_OPENING,
        *(substitute_secrets(command, secrets) for command in commands),
        COMMANDS_CLOSING,
        'if [ "$pai_exit_code" -ne 0 ]; then exit "$pai_exit_code"; fi',
    ]
    for number, name, policy, added in reversed(contributions):
        sections += _guarded(added.post, f"runtime plugin #{number} ({name}) post-commands", policy)
    sections.append("exit 0")
    return "\n".join(sections) + "\n"


def role_commands(script: str) -> str:
    """The task role's commands inside a script that `build_task_script` built (the whole
    script when it was not)."""
    start = script.find(COMMANDS_OPENING + "\n")
    if start < 0:
        return script
    start += len(COMMANDS_OPENING) + 1
    end = script.rfind("\n" + COMMANDS_CLOSING)
    return script[start:end] if end >= start else script[start:]


def _guarded(commands: Sequence[str], what: str, policy: FailurePolicy) -> list[str]:
    """`commands` under errexit for `fail`; for `ignore`, a warning per failed command."""
    if not commands:
        return []
    fail = policy == "fail"
    consequence = "the task fails" if fail else "ignored"
    message = f"[pai] {what}: a command failed with exit code $?; {consequence}"
    handler = 'echo "' + message + '" >&2'
    return [
        f"# {what} (failurePolicy {policy})",
        *(["set -o errexit"] if fail else []),
        f"trap {shlex.quote(handler)} ERR",
        *commands,
        "trap - ERR",
        *(["set +o errexit"] if fail else []),
    ]


def _substitute(value: Any, secrets: Mapping[str, Any]) -> Any:
    """Secret references inside plugin parameters, at any depth."""
    if isinstance(value, str):
        return substitute_secrets(value, secrets)
    if isinstance(value, Mapping):
        return {key: _substitute(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_substitute(item, secrets) for item in value]
    return value


def _list(parameters: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = parameters.get(name, [])
    if not isinstance(value, list):
        raise PluginError(f"{where}.{name}: expected a list, got {value!r}")
    return value


def _strings(parameters: Mapping[str, Any], name: str, where: str) -> list[str]:
    values = _list(parameters, name, where)
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise PluginError(f"{where}.{name}[{index}]: expected a string, got {value!r}")
    return values


def _split(option: str, where: str) -> list[str]:
    try:
        return shlex.split(option)
    except ValueError as exc:
        raise PluginError(f"{where}.options: cannot split an option into words: {exc}") from None
