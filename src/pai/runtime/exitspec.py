"""The exit spec: OpenPAI's catalogue of exit codes, as data, and the classification of failures.

Retrying only what a retry can fix hinges on recognising a failure: a Python `SyntaxError` must
fail the job at once even with `jobRetryCount: 5`, while a task killed by SIGKILL should come back
for free. The rules live in `exit-spec.yaml` beside this module (OpenPAI's codes, phrases and
attributes); an administrator adds or overrides records with a file of the same shape, picked up
on change without a restart (`ExitSpecSource`).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from pai.cluster.yamlsource import Path as YamlPath
from pai.cluster.yamlsource import format_path, load_located
from pai.errors import ConfigurationError
from pai.runtime.classification import (
    Behavior,
    Causer,
    Classification,
    ExitCode,
    FailureType,
    Issuer,
    Reaction,
    Stage,
    diagnostic_lines,
)

log = logging.getLogger(__name__)

BUILTIN_SPEC_RESOURCE = "exit-spec.yaml"
MAX_MATCHED_CHARS = 512


def _compile_regex(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from None


Regex = Annotated[re.Pattern[str], BeforeValidator(_compile_regex)]


@dataclass(frozen=True)
class PatternMatch:
    user_log: re.Match[str] | None
    runtime_log: re.Match[str] | None


class RuntimeContainerPattern(BaseModel):
    """One way to recognise a failure from the command's exit code and the two logs."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    exit_code: int | None = Field(default=None, alias="exitCode")
    user_log_regex: Regex | None = Field(default=None, alias="userLogRegex")
    platform_log_regex: Regex | None = Field(default=None, alias="platformLogRegex")

    @model_validator(mode="after")
    def _not_empty(self) -> RuntimeContainerPattern:
        if (
            self.exit_code is None
            and self.user_log_regex is None
            and self.platform_log_regex is None
        ):
            raise ValueError(
                "a pattern needs at least one of exitCode, userLogRegex, platformLogRegex "
                "(an empty pattern would match every failure)"
            )
        return self

    def match(self, exit_code: int, user_log: str, runtime_log: str) -> PatternMatch | None:
        """The matches when every field present matches, else None."""
        if self.exit_code is not None and self.exit_code != exit_code:
            return None
        user = runtime = None
        if self.user_log_regex is not None:
            user = self.user_log_regex.search(user_log)
            if user is None:
                return None
        if self.platform_log_regex is not None:
            runtime = self.platform_log_regex.search(runtime_log)
            if runtime is None:
                return None
        return PatternMatch(user, runtime)


class ExitPattern(BaseModel):
    """How a code is detected. `controllerPodPatterns` is accepted so OpenPAI spec files load;
    pod-level conditions (out of memory, eviction) are reported by executors with their code."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    runtime_container_patterns: tuple[RuntimeContainerPattern, ...] = Field(
        default=(), alias="runtimeContainerPatterns"
    )
    controller_pod_patterns: tuple[Mapping[str, Any], ...] = Field(
        default=(), alias="controllerPodPatterns"
    )


class ExitCodeRecord(BaseModel):
    """One exit code: its meaning for people and its retry behaviour for the controller."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: int = Field(ge=-8000, le=256)
    phrase: str = Field(min_length=1)
    issuer: Issuer = Issuer.UNKNOWN
    causer: Causer = Causer.UNKNOWN
    type: FailureType = FailureType.UNKNOWN_FAILURE
    stage: Stage = Stage.UNKNOWN
    behavior: Behavior = Behavior.UNKNOWN
    reaction: Reaction = Reaction.RETRY_TO_MAX
    reason: str = ""
    repro: tuple[str, ...] = ()
    solution: tuple[str, ...] = ()
    pattern: ExitPattern | None = None

    @property
    def runtime_patterns(self) -> tuple[RuntimeContainerPattern, ...]:
        return self.pattern.runtime_container_patterns if self.pattern else ()


class ExitSpec:
    """An ordered, validated set of records: classification tries them in order."""

    def __init__(self, records: Iterable[ExitCodeRecord]) -> None:
        self._records = tuple(records)
        self._by_code = {record.code: record for record in self._records}
        missing = [
            code
            for code in (
                ExitCode.SUCCEEDED,
                ExitCode.RUNTIME_UNKNOWN_FAILED,
                ExitCode.UNDEFINED_POSITIVE,
                ExitCode.UNDEFINED_NEGATIVE,
            )
            if code not in self._by_code
        ]
        if missing:
            raise ConfigurationError(f"exit spec lacks the records of codes {missing}")

    @property
    def records(self) -> tuple[ExitCodeRecord, ...]:
        return self._records

    def describe(self, code: int) -> ExitCodeRecord:
        """The record of `code`; an undefined code gets the 256 or -8000 record, with its number."""
        record = self._by_code.get(code)
        if record is not None:
            return record
        fallback = ExitCode.UNDEFINED_NEGATIVE if code < 0 else ExitCode.UNDEFINED_POSITIVE
        return self._by_code[fallback].model_copy(update={"code": code})

    def classify(
        self, exit_code: int, user_log_tail: str = "", runtime_log_tail: str = ""
    ) -> Classification:
        """Classify a command that exited with `exit_code` (0-255), as the runtime's exit handler
        does: the first record whose pattern matches wins, and no match gives 255."""
        if exit_code < 0:
            raise ValueError(f"exit code {exit_code} is not a process exit status; use for_code()")
        if exit_code == ExitCode.SUCCEEDED:
            return self.for_code(exit_code, origin_exit_code=exit_code)
        for record in self._records:
            for pattern in record.runtime_patterns:
                found = pattern.match(exit_code, user_log_tail, runtime_log_tail)
                if found is not None:
                    return _classification(
                        record,
                        origin_exit_code=exit_code,
                        matched_user_log=_matched_text(found.user_log),
                        matched_runtime_log=_matched_text(found.runtime_log),
                        diagnostics=diagnostic_lines(user_log_tail, found.user_log),
                    )
        return _classification(
            self.describe(ExitCode.RUNTIME_UNKNOWN_FAILED),
            origin_exit_code=exit_code,
            diagnostics=diagnostic_lines(user_log_tail, None),
        )

    def for_code(
        self, code: int, *, origin_exit_code: int | None = None, diagnostics: Sequence[str] = ()
    ) -> Classification:
        """The classification of a code the platform decided itself (a stop, an OOM kill, ...)."""
        return _classification(
            self.describe(code), origin_exit_code=origin_exit_code, diagnostics=diagnostics
        )


def _classification(
    record: ExitCodeRecord,
    *,
    origin_exit_code: int | None,
    matched_user_log: str | None = None,
    matched_runtime_log: str | None = None,
    diagnostics: Sequence[str] = (),
) -> Classification:
    return Classification(
        code=record.code,
        phrase=record.phrase,
        type=record.type,
        behavior=record.behavior,
        reaction=record.reaction,
        reason=record.reason,
        solution=record.solution,
        origin_exit_code=origin_exit_code,
        matched_user_log=matched_user_log,
        matched_runtime_log=matched_runtime_log,
        diagnostics=tuple(diagnostics),
    )


def _matched_text(match: re.Match[str] | None) -> str | None:
    return None if match is None else match.group(0)[:MAX_MATCHED_CHARS]


class ExitSpecError(ConfigurationError):
    """An exit-spec file cannot be used; the message names the file, the record and the line."""


_RECORDS = TypeAdapter(list[ExitCodeRecord])
_IGNORED_TOP_LEVEL_KEYS = frozenset({"schema", "service_type"})  # present in OpenPAI's own file


def parse_exit_spec(text: str, source: str) -> list[ExitCodeRecord]:
    """Records of one spec document (a mapping with a `spec:` list), validated."""
    try:
        located = load_located(text)
    except yaml.YAMLError as exc:
        raise ExitSpecError(f"{source}: not valid YAML: {exc}") from None
    data, lines = located.data, located.lines
    if not isinstance(data, dict) or "spec" not in data:
        raise ExitSpecError(f"{source}: expected a mapping with a 'spec' list of exit-code records")
    unknown = sorted(
        str(key) for key in data if key != "spec" and key not in _IGNORED_TOP_LEVEL_KEYS
    )
    if unknown:
        raise ExitSpecError(f"{source}: unknown top-level keys {unknown}; expected 'spec'")
    try:
        records = _RECORDS.validate_python(data["spec"] or [])
    except ValidationError as exc:
        problems = [
            _describe_error(source, ("spec", *error["loc"]), error["msg"], data, lines)
            for error in exc.errors()
        ]
        raise ExitSpecError("\n".join(problems)) from None
    _check_unique(records, source, lines)
    return records


def _check_unique(
    records: Sequence[ExitCodeRecord], source: str, lines: Mapping[YamlPath, int]
) -> None:
    seen_codes: dict[int, int] = {}
    seen_phrases: dict[str, int] = {}
    for index, record in enumerate(records):
        where = f"{source}:{lines.get(('spec', index), '?')}: spec[{index}]"
        if record.code in seen_codes:
            raise ExitSpecError(
                f"{where}: code {record.code} already defined by spec[{seen_codes[record.code]}]"
            )
        if record.phrase in seen_phrases:
            raise ExitSpecError(
                f"{where}: phrase {record.phrase!r} already used by "
                f"spec[{seen_phrases[record.phrase]}]"
            )
        seen_codes[record.code] = index
        seen_phrases[record.phrase] = index


def _describe_error(
    source: str, loc: YamlPath, message: str, data: Any, lines: Mapping[YamlPath, int]
) -> str:
    path = format_path(loc)
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
    record = data["spec"][loc[1]] if len(loc) > 1 and isinstance(loc[1], int) else None
    code = f" (code {record['code']})" if isinstance(record, dict) and "code" in record else ""
    return f"{source}:{line if line is not None else '?'}: {path}{code}: {message}"


@functools.cache
def builtin_records() -> tuple[ExitCodeRecord, ...]:
    """The records shipped with PAI."""
    text = resources.files("pai.runtime").joinpath(BUILTIN_SPEC_RESOURCE).read_text("utf-8")
    return tuple(parse_exit_spec(text, f"built-in {BUILTIN_SPEC_RESOURCE}"))


def builtin_exit_spec() -> ExitSpec:
    return ExitSpec(builtin_records())


def merge_records(
    admin: Sequence[ExitCodeRecord], builtin: Sequence[ExitCodeRecord], source: str
) -> ExitSpec:
    """Administrator records first (they win when several match), then the built-in ones they
    do not replace."""
    replaced = {record.code for record in admin}
    records = [*admin, *(record for record in builtin if record.code not in replaced)]
    phrases: dict[str, int] = {}
    for record in records:
        owner = phrases.setdefault(record.phrase, record.code)
        if owner != record.code:
            raise ExitSpecError(
                f"{source}: code {owner} uses the phrase {record.phrase!r} of built-in code "
                f"{record.code}; phrases must be unique"
            )
    return ExitSpec(records)


def load_exit_spec(admin_path: Path | None = None) -> ExitSpec:
    """The built-in spec, extended by the administrator's file when it exists."""
    if admin_path is None or not admin_path.exists():
        return builtin_exit_spec()
    try:
        text = admin_path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExitSpecError(f"{admin_path}: cannot be read: {exc}") from None
    source = str(admin_path)
    return merge_records(parse_exit_spec(text, source), builtin_records(), source)


class ExitSpecSource:
    """The live spec: built-in rules plus the administrator's file, reloaded when it changes.

    Reading is one `stat` per call. A broken file is logged, kept in `last_error` for display,
    and the last good spec stays in force until the file is fixed.
    """

    def __init__(self, admin_path: Path | None = None) -> None:
        self._admin_path = admin_path
        self._lock = threading.Lock()
        self._spec = builtin_exit_spec()
        self._version: tuple[int, ...] | None = None
        self._last_error: str | None = None
        self.current()

    @property
    def admin_path(self) -> Path | None:
        return self._admin_path

    @property
    def last_error(self) -> str | None:
        """Why the administrator's file is not in force, or None when it is (or there is none)."""
        return self._last_error

    def current(self) -> ExitSpec:
        if self._admin_path is None:
            return self._spec
        version = self._file_version(self._admin_path)
        with self._lock:
            if version != self._version:
                self._version = version
                self._reload()
            return self._spec

    def _reload(self) -> None:
        try:
            self._spec = load_exit_spec(self._admin_path)
        except ExitSpecError as exc:
            self._last_error = str(exc)
            log.error("exit spec not reloaded, the previous one stays in force: %s", exc)
        else:
            self._last_error = None

    @staticmethod
    def _file_version(path: Path) -> tuple[int, ...] | None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
