"""Rules that tie one part of a job to another: names that must exist, be unique, or not clash.

They run on the document's plain values, not on a validated JobSpec, so that a job with a wrong
type in one place and a dangling reference in another gets both problems reported at once. A
value of the wrong shape is skipped here: validation reports it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from pai.protocol.base import IDENTIFIER_PATTERN
from pai.protocol.base import describe_value as quoted  # names in messages, long ones shortened
from pai.protocol.errors import Problem
from pai.protocol.names import kubernetes_name
from pai.protocol.yaml_values import SourceMap

_KINDS = ("dockerimage", "script", "output", "data")
_ROLE_FIELDS = {
    "dockerImage": "dockerimage",
    "script": "script",
    "output": "output",
    "data": "data",
}
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_MAX_LISTED = 10


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _suggestion(name: str, known: Iterable[str], what: str) -> str:
    candidates = sorted(known)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {quoted(close[0])}?"
    if candidates:
        shown = ", ".join(candidates[:_MAX_LISTED]) + (
            ", ..." if len(candidates) > _MAX_LISTED else ""
        )
        return f"; the job's {what}: {shown}"
    return f"; the job defines no {what}"


class _Checker:
    def __init__(self, data: dict[Any, Any], sources: SourceMap) -> None:
        self.data = data
        self.sources = sources
        self.problems: list[Problem] = []
        self.roles = _mapping(data.get("taskRoles"))

    def report(self, path: tuple[Any, ...], message: str, *, of_key: bool = False) -> None:
        self.problems.append(self.sources.problem(path, message, of_key=of_key))

    def prerequisite_names(self) -> dict[str, dict[str, int]]:
        """Names of the prerequisites by type; a repeated name of the same type is a problem."""
        names: dict[str, dict[str, int]] = {kind: {} for kind in _KINDS}
        for index, item in enumerate(_items(self.data.get("prerequisites"))):
            item = _mapping(item)
            kind, name = item.get("type"), item.get("name")
            if not isinstance(kind, str) or kind not in names or not isinstance(name, str):
                continue
            first = names[kind].get(name)
            if first is not None:
                self.report(
                    ("prerequisites", index, "name"),
                    f"another {kind} prerequisite is already named {quoted(name)} "
                    f"(prerequisites[{first}]); names must be unique per type",
                )
            else:
                names[kind][name] = index
        return names

    def role_references(self, names: dict[str, dict[str, int]]) -> None:
        every_name = {name for by_name in names.values() for name in by_name}
        for role, spec in self.roles.items():
            spec = _mapping(spec)
            for field, kind in _ROLE_FIELDS.items():
                chosen = spec.get(field)
                if isinstance(chosen, str) and chosen not in names[kind]:
                    self.report(
                        ("taskRoles", role, field),
                        f"there is no {kind} prerequisite named {quoted(chosen)}"
                        + _suggestion(chosen, names[kind], f"{kind} prerequisites"),
                    )
            for index, chosen in enumerate(_items(spec.get("prerequisites"))):
                if isinstance(chosen, str) and chosen not in every_name:
                    self.report(
                        ("taskRoles", role, "prerequisites", index),
                        f"there is no prerequisite named {quoted(chosen)}"
                        + _suggestion(chosen, every_name, "prerequisites"),
                    )

    def deployments(self) -> None:
        seen: dict[str, int] = {}
        for index, deployment in enumerate(_items(self.data.get("deployments"))):
            deployment = _mapping(deployment)
            name = deployment.get("name")
            if isinstance(name, str):
                if name in seen:
                    self.report(
                        ("deployments", index, "name"),
                        f"another deployment is already named {quoted(name)} "
                        f"(deployments[{seen[name]}])",
                    )
                else:
                    seen[name] = index
            for role in _mapping(deployment.get("taskRoles")):
                if role not in self.roles:
                    self.report(
                        ("deployments", index, "taskRoles", role),
                        f"there is no task role named {quoted(role)}"
                        + _suggestion(str(role), map(str, self.roles), "task roles"),
                        of_key=True,
                    )
        chosen = _mapping(self.data.get("defaults")).get("deployment")
        if isinstance(chosen, str) and chosen not in seen:
            self.report(
                ("defaults", "deployment"),
                f"there is no deployment named {quoted(chosen)}"
                + _suggestion(chosen, seen, "deployments"),
            )

    def scheduler_settings(self) -> None:
        hived = _mapping(_mapping(self.data.get("extras")).get("hivedScheduler"))
        groups: dict[str, dict[str, Any]] = {}
        for role, settings in _mapping(hived.get("taskRoles")).items():
            path = ("extras", "hivedScheduler", "taskRoles", role)
            if role not in self.roles:
                self.report(
                    path,
                    f"there is no task role named {quoted(role)}"
                    + _suggestion(str(role), map(str, self.roles), "task roles"),
                    of_key=True,
                )
            settings = _mapping(settings)
            placement = {
                field: settings.get(field)
                for field in ("skuType", "pinnedCellId")
                if settings.get(field) is not None
            }
            if len(placement) == 2:
                self.report(
                    (*path, "pinnedCellId"),
                    "skuType and pinnedCellId exclude each other: a role runs either on any cell "
                    "of a SKU or on one pinned cell",
                )
            group = settings.get("affinityGroupName")
            if not isinstance(group, str):
                continue
            agreed = groups.setdefault(group, {"role": role})
            for field, value in placement.items():
                if agreed.setdefault(field, value) != value:
                    self.report(
                        (*path, field),
                        f"roles of affinity group {quoted(group)} must share one {field}, but role "
                        f"{quoted(agreed['role'])} asks for {quoted(agreed[field])}",
                    )

    def role_names(self) -> None:
        converted: dict[str, str] = {}
        for role in self.roles:
            if not isinstance(role, str) or not _IDENTIFIER.match(role):
                continue
            name = kubernetes_name(role)
            if not name:
                self.report(
                    ("taskRoles", role),
                    f"role name {quoted(role)} needs at least one letter or digit",
                    of_key=True,
                )
            elif name in converted:
                self.report(
                    ("taskRoles", role),
                    f"role names {quoted(converted[name])} and {quoted(role)} are the same once "
                    f"lower-cased without '_' ({quoted(name)}), which PAI needs to tell roles "
                    "apart; rename one",
                    of_key=True,
                )
            else:
                converted[name] = role


def reference_problems(data: Any, sources: SourceMap) -> list[Problem]:
    """Problems with names across the job: prerequisites, deployments, scheduler roles, roles."""
    if not isinstance(data, dict):
        return []
    checker = _Checker(data, sources)
    checker.role_references(checker.prerequisite_names())
    checker.deployments()
    checker.scheduler_settings()
    checker.role_names()
    return checker.problems
