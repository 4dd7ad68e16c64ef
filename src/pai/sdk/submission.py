"""The body of a job submission, from YAML text, a file or a dict, with client-side edits.

`parameters` and `virtual_cluster` edit the job before it is sent (OpenPAI's server takes the
job as it is). Without edits, YAML goes byte for byte, so the line numbers in the server's
problems are the file's own.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pai.sdk.errors import InvalidArgumentError

JobSource = str | os.PathLike[str] | Mapping[str, Any]
"""A job: YAML text (`str`), a file (`pathlib.Path` or any path-like), or the job as a dict."""

YAML_TYPE = "text/yaml"
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class JobRequest:
    """What `POST /jobs` receives."""

    content: bytes
    content_type: str


def job_request(
    job: JobSource,
    parameters: Mapping[str, Any] | None = None,
    virtual_cluster: str | None = None,
) -> JobRequest:
    """The request body for `job` with `parameters` overriding declared ones and
    `virtual_cluster` replacing `defaults.virtualCluster`."""
    edits = bool(parameters) or virtual_cluster is not None
    if isinstance(job, Mapping):
        given = dict(job)
        body = _edited(given, parameters, virtual_cluster) if edits else given
        return JobRequest(json.dumps(body).encode(), JSON_TYPE)
    text = _read(job) if isinstance(job, os.PathLike) else job
    if not edits:
        return JobRequest(text.encode(), YAML_TYPE)
    try:
        document: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        document = None
    if not isinstance(document, dict):
        # Not a job at all: the server's answer will say where, edits cannot help.
        return JobRequest(text.encode(), YAML_TYPE)
    edited = _edited(document, parameters, virtual_cluster)
    return JobRequest(yaml.dump(edited, Dumper=_JobDumper, **_YAML_STYLE).encode(), YAML_TYPE)


def _read(path: os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or exc
        raise InvalidArgumentError(f"cannot read {os.fspath(path)}: {reason}") from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{os.fspath(path)} is not UTF-8 text") from None


def _edited(
    document: dict[str, Any],
    parameters: Mapping[str, Any] | None,
    virtual_cluster: str | None,
) -> dict[str, Any]:
    edited = copy.deepcopy(document)
    if parameters:
        declared = edited.get("parameters")
        declared = declared if isinstance(declared, dict) else {}
        unknown = sorted(set(parameters) - set(declared))
        if unknown:
            known = ", ".join(sorted(map(str, declared))) or "none"
            raise InvalidArgumentError(
                f"the job declares no parameter {', '.join(map(repr, unknown))} (declared: {known})"
            )
        edited["parameters"] = {**declared, **parameters}
    if virtual_cluster is not None:
        defaults = edited.get("defaults")
        edited["defaults"] = {
            **(defaults if isinstance(defaults, dict) else {}),
            "virtualCluster": virtual_cluster,
        }
    return edited


class _JobDumper(yaml.SafeDumper):
    """Writes multi-line strings (commands, scripts) as `|` blocks, as people write them."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_JobDumper.add_representer(str, _represent_str)
_YAML_STYLE: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "width": 1000}
