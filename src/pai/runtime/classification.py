"""What the platform concluded about a task's end, and the vocabulary of the exit spec.

Kept apart from the rule engine (`pai.runtime.exitspec`) so that code which only passes
verdicts around (executors, a task's supervisor while it runs) stays light.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

# Context kept around a matched line: enough to show a traceback's last frames.
DIAGNOSTIC_LINES_BEFORE = 10
DIAGNOSTIC_LINES_AFTER = 4
MAX_DIAGNOSTIC_BYTES = 4096
MAX_DIAGNOSTIC_LINE_CHARS = 512


class ExitCode(IntEnum):
    """Codes the platform itself issues or relies on; their records are in the built-in spec."""

    SUCCEEDED = 0
    POD_EXTERNAL_DELETED = -101
    POD_CREATION_TRANSIENT_ERROR = -120
    POD_CREATION_PERMANENT_ERROR = -200
    STOP_FRAMEWORK_REQUESTED = -210
    FRAMEWORK_ATTEMPT_COMPLETION = -220
    DELETE_TASK_REQUESTED = -230
    POD_NODE_LOST = -1001
    POD_NODE_ADMISSION_UNEXPECTED_ERROR = -1006
    USER_CONTAINER_OOM_KILLED = -1200
    CONTAINER_CREATION_ERROR = -1201
    CONTAINER_START_CMD_PERMISSION_DENIED = -1202
    CONTAINER_START_CMD_NOT_FOUND = -1203
    CONTAINER_START_UNKNOWN_ERROR = -1204
    CONTAINER_GPU_DEVICE_NOT_FOUND = -1205
    SIGKILL_RECEIVED = 137
    SIGTERM_RECEIVED = 143
    JOB_GANG_ALLOCATION_TIMEOUT = 251
    CONTAINER_PORT_CONFLICT = 253
    CONTAINER_IMAGE_NOT_EXISTS = 254
    RUNTIME_UNKNOWN_FAILED = 255
    UNDEFINED_POSITIVE = 256
    UNDEFINED_NEGATIVE = -8000


class Issuer(StrEnum):
    USER_CONTAINER = "USER_CONTAINER"
    PAI_OS = "PAI_OS"
    PAI_RUNTIME = "PAI_RUNTIME"
    PAI_DOCKER = "PAI_DOCKER"
    PAI_K8S = "PAI_K8S"
    PAI_FC = "PAI_FC"
    PAI_DB_CONTROLLER = "PAI_DB_CONTROLLER"
    UNKNOWN = "UNKNOWN"


class Causer(StrEnum):
    USER_SUBMISSION = "USER_SUBMISSION"
    USER_CONTAINER = "USER_CONTAINER"
    USER_STOP = "USER_STOP"
    USER_SCALEDOWN = "USER_SCALEDOWN"
    USER_RETRY = "USER_RETRY"
    USER_UPGRADE = "USER_UPGRADE"
    USER_UNKNOWN = "USER_UNKNOWN"
    RESOURCE_ALLOCATION_TIMEOUT = "RESOURCE_ALLOCATION_TIMEOUT"
    PAI_OS = "PAI_OS"
    PAI_DOCKER = "PAI_DOCKER"
    PAI_RUNTIME = "PAI_RUNTIME"
    PAI_K8S = "PAI_K8S"
    PAI_FC = "PAI_FC"
    PAI_HW = "PAI_HW"
    PAI_UNKNOWN = "PAI_UNKNOWN"
    UNKNOWN = "UNKNOWN"


class FailureType(StrEnum):
    USER_SUCCESS = "USER_SUCCESS"
    USER_STOP = "USER_STOP"
    USER_FAILURE = "USER_FAILURE"
    PLATFORM_FAILURE = "PLATFORM_FAILURE"
    RESOURCE_ALLOCATION_TIMEOUT = "RESOURCE_ALLOCATION_TIMEOUT"
    UNKNOWN_FAILURE = "UNKNOWN_FAILURE"


class Stage(StrEnum):
    SUBMITTING = "SUBMITTING"
    ALLOCATING = "ALLOCATING"
    LAUNCHING = "LAUNCHING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    UNKNOWN = "UNKNOWN"


class Behavior(StrEnum):
    """What a retry is expected to do; the retry policy acts on this, not on `Reaction`."""

    TRANSIENT = "TRANSIENT"
    TRANSIENT_CONFLICT = "TRANSIENT_CONFLICT"
    PERMANENT = "PERMANENT"
    UNKNOWN = "UNKNOWN"


class Reaction(StrEnum):
    ALWAYS_RETRY = "ALWAYS_RETRY"
    ALWAYS_BACKOFF_RETRY = "ALWAYS_BACKOFF_RETRY"
    RETRY_TO_MAX = "RETRY_TO_MAX"
    NEVER_RETRY = "NEVER_RETRY"


@dataclass(frozen=True)
class Classification:
    """The verdict on a task's end: which code, why, and the log lines that show it."""

    code: int
    phrase: str
    type: FailureType
    behavior: Behavior
    reaction: Reaction
    reason: str
    solution: tuple[str, ...]
    origin_exit_code: int | None = None
    matched_user_log: str | None = None
    matched_runtime_log: str | None = None
    diagnostics: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.code == ExitCode.SUCCEEDED

    @property
    def transient(self) -> bool:
        """A retry is expected to help and does not count against the retry budget."""
        return self.behavior in (Behavior.TRANSIENT, Behavior.TRANSIENT_CONFLICT)

    @property
    def permanent(self) -> bool:
        """Retrying would fail the same way."""
        return self.behavior is Behavior.PERMANENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "phrase": self.phrase,
            "type": self.type.value,
            "behavior": self.behavior.value,
            "reaction": self.reaction.value,
            "reason": self.reason,
            "solution": list(self.solution),
            "origin_exit_code": self.origin_exit_code,
            "matched_user_log": self.matched_user_log,
            "matched_runtime_log": self.matched_runtime_log,
            "diagnostics": list(self.diagnostics),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Classification:
        return cls(
            code=int(data["code"]),
            phrase=str(data["phrase"]),
            type=FailureType(data["type"]),
            behavior=Behavior(data["behavior"]),
            reaction=Reaction(data["reaction"]),
            reason=str(data["reason"]),
            solution=tuple(data["solution"]),
            origin_exit_code=data.get("origin_exit_code"),
            matched_user_log=data.get("matched_user_log"),
            matched_runtime_log=data.get("matched_runtime_log"),
            diagnostics=tuple(data.get("diagnostics", ())),
        )


def diagnostic_lines(log_text: str, match: re.Match[str] | None) -> tuple[str, ...]:
    """About 15 lines around `match` (the log's last lines without one), at most 4 KB in all.

    More lines come from before the match than after it: a Python traceback prints the offending
    source line above the error it ends with. A line redrawn with carriage returns (a progress
    bar) is shown as a terminal would show it, by its last redraw.
    """
    lines = log_text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return ()
    anchor = len(lines) - 1 if match is None else log_text.count("\n", 0, match.start())
    anchor = min(anchor, len(lines) - 1)
    after = 0 if match is None else DIAGNOSTIC_LINES_AFTER
    before = DIAGNOSTIC_LINES_BEFORE + DIAGNOSTIC_LINES_AFTER - after
    window = [
        _as_displayed(line)[:MAX_DIAGNOSTIC_LINE_CHARS]
        for line in lines[max(0, anchor - before) : anchor + after + 1]
    ]
    while len(window) > 1 and sum(len(line.encode()) + 1 for line in window) > MAX_DIAGNOSTIC_BYTES:
        window.pop(0)
    return tuple(window)


def _as_displayed(line: str) -> str:
    return line.rstrip("\r").rsplit("\r", 1)[-1]
