"""`<% $... %>` references: parameters and prerequisites resolved at submission, secrets at launch.

A role sees `$parameters`, and `$script`, `$data` and `$output` of the prerequisites it selected
itself. A reference that does not resolve (no such field, a null value, a prerequisite the role
did not select) stays in the text as written, as in OpenPAI. Secrets are never substituted here
except by `substitute_secrets`, which only the code that starts a task calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pai.protocol.job import JobSpec
from pai.protocol.masking import masked_job_dict

# Bounded and free of '%' so that scanning hostile text stays linear.
_REFERENCE = re.compile(r"<%\s*\$([^%]{1,512})%>")
_INDEX = re.compile(r"\[\s*(\d+)\s*\]")
_PREREQUISITE_SCOPES: tuple[Literal["script", "data", "output"], ...] = ("script", "data", "output")


class _Unresolved:
    """The result of looking up a reference that leads nowhere."""


_UNRESOLVED = _Unresolved()


def _parts(reference: str) -> list[str]:
    return [part.strip() for part in _INDEX.sub(r".\1", reference.strip()).split(".")]


def _lookup(scope: Mapping[str, Any], reference: str) -> Any:
    node: Any = scope
    for part in _parts(reference):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _UNRESOLVED
    return _UNRESOLVED if node is None else node


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _substitute(
    text: str, scope: Mapping[str, Any], unresolved: Callable[[re.Match[str]], str]
) -> str:
    def replace(match: re.Match[str]) -> str:
        value = _lookup(scope, match.group(1))
        return unresolved(match) if isinstance(value, _Unresolved) else _as_text(value)

    return _REFERENCE.sub(replace, text)


def _keep(match: re.Match[str]) -> str:
    return match.group(0)


def _role_scope(spec: JobSpec, role: str) -> dict[str, Any]:
    if role not in spec.task_roles:
        raise KeyError(f"the job has no task role named {role!r}")
    task_role = spec.task_roles[role]
    scope: dict[str, Any] = {"parameters": spec.parameters}
    for kind in _PREREQUISITE_SCOPES:
        chosen = getattr(task_role, kind)
        prerequisite = spec.prerequisite(kind, chosen) if chosen is not None else None
        if prerequisite is not None:
            scope[kind] = prerequisite.model_dump(by_alias=True, exclude_none=True, mode="json")
    return scope


def render_text(text: str, spec: JobSpec, role: str) -> str:
    """`text` with the role's parameter and prerequisite references resolved (secrets kept)."""
    return _substitute(text, _role_scope(spec, role), _keep)


def render_nested(value: Any, spec: JobSpec, role: str) -> Any:
    """`render_text` applied to every string inside lists and mappings (plugin parameters)."""
    scope = _role_scope(spec, role)

    def render(item: Any) -> Any:
        if isinstance(item, str):
            return _substitute(item, scope, _keep)
        if isinstance(item, list):
            return [render(element) for element in item]
        if isinstance(item, dict):
            return {key: render(element) for key, element in item.items()}
        return item

    return render(value)


def render_commands(spec: JobSpec, role: str) -> list[str]:
    """The role's final command lines: the deployment's pre- and post-commands around the role's,
    references to parameters and the role's prerequisites resolved, each line trimmed.

    Secret references stay as written; raises KeyError for an unknown role.
    """
    scope = _role_scope(spec, role)
    pre: list[str] = []
    post: list[str] = []
    for deployment in spec.deployments:
        if deployment.name == spec.defaults.deployment and role in deployment.task_roles:
            pre = deployment.task_roles[role].pre_commands
            post = deployment.task_roles[role].post_commands
    commands = [*pre, *spec.task_roles[role].commands, *post]
    return [_substitute(command, scope, _keep).strip() for command in commands]


def substitute_secrets(text: str, secrets: Mapping[str, Any]) -> str:
    """`text` with its `<% $secrets.name %>` references replaced by the secrets' values.

    Only for what a task receives when it starts; never store the result. A reference to a
    secret that does not exist becomes the empty string, as OpenPAI's runtime does. Other
    references are left alone.
    """

    def unresolved(match: re.Match[str]) -> str:
        return "" if _parts(match.group(1))[0] == "secrets" else match.group(0)

    return _substitute(text, {"secrets": secrets}, unresolved)


def secret_names(text: str) -> set[str]:
    """The names of the secrets `text` refers to (`<% $secrets.name %>`)."""
    names = set()
    for match in _REFERENCE.finditer(text):
        parts = _parts(match.group(1))
        if parts[0] == "secrets" and len(parts) > 1:
            names.add(parts[1])
    return names


def rendered_job_dict(spec: JobSpec) -> dict[str, Any]:
    """The job as it is stored: OpenPAI JSON with secret values masked and every role's
    `commands` final (`render_commands`), so the chosen deployment is already applied and
    `deployments` and `defaults.deployment` are left out. Secret references stay for launch.
    """
    stored = masked_job_dict(spec)
    for role, task_role in stored["taskRoles"].items():
        task_role["commands"] = render_commands(spec, role)
    stored.pop("deployments", None)
    stored.get("defaults", {}).pop("deployment", None)
    return stored
