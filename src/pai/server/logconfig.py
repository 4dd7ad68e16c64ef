"""Structured (JSON lines) logging that never carries a password or a token.

Secrets are kept out twice: the server never logs headers or bodies, and every line passes
`redact`, which blanks anything shaped like a token, an `Authorization` value, a password field
or a password hash, so a secret in an exception message or a URL path is caught as well.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import IO, Any

REDACTED = "[REDACTED]"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # JWTs (every PAI token is one): base64url header starting with '{"', payload, signature.
    (re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), REDACTED),
    # Credentials after an HTTP auth scheme, e.g. an echoed Authorization header.
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+"), rf"\1\2{REDACTED}"),
    # Password-like fields in JSON, query strings or reprs: "password": "x", password=x.
    (
        re.compile(
            r"""(?ix)
            (["']?\b[a-z_]*(?:password|passwd|secret|token)[a-z_]*["']?\s*[:=]\s*)
            ("[^"]*"|'[^']*'|[^\s,;&}\]]+)
            """
        ),
        rf"\1{REDACTED}",
    ),
    # Argon2 password hashes.
    (re.compile(r"\$argon2[a-z]*\$[^\s'\")]+"), REDACTED),
)
_STANDARD_ATTRIBUTES = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)
_IGNORED_EXTRAS = frozenset({"color_message"})
"""uvicorn's terminal-coloured copy of the message."""


_SECRET_WORDS = ("eyj", "bearer", "basic", "passw", "secret", "token", "$argon2")
"""Words, any case, at least one of which is in any text `_PATTERNS` could match: most text has
none of them, and looking for them is far cheaper than trying every pattern."""
_ANY_SECRET_WORD = re.compile("|".join(map(re.escape, _SECRET_WORDS)), re.IGNORECASE)


def _may_hold_secrets(text: str) -> bool:
    if text.isascii():  # lower() then maps letters one to one: plain substring searches
        lowered = text.lower()
        return any(word in lowered for word in _SECRET_WORDS)
    return _ANY_SECRET_WORD.search(text) is not None  # 14 µs on a log line, but exact


def redact(text: str) -> str:
    """`text` with every secret-shaped part replaced by `[REDACTED]`."""
    if not _may_hold_secrets(text):
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Redacts a record's message and arguments in place, before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_value(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _redact_value(value) for key, value in record.args.items()}
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, any `extra` fields, exception.

    Every string is redacted before it is serialised (redacting the serialised line instead
    could cut through JSON quoting). Most lines hold nothing secret-shaped: a line is first
    serialised as it is, and only if that text has a word any pattern could start at are its
    strings redacted one by one (a word such as `token` is written the same inside JSON).
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRIBUTES and key not in _IGNORED_EXTRAS:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        line = json.dumps(entry, default=str)
        if not _may_hold_secrets(line):
            return line
        return json.dumps(_redacted_json_value(entry))


def configure_logging(level: str, stream: IO[str]) -> logging.Handler:
    """Send every log record of the process to `stream` as redacted JSON lines.

    Returns the handler so that whoever installed it can remove it again.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    protect_library_loggers()
    return handler


def protect_library_loggers() -> None:
    """Redact records of the web server's own loggers where they are created, so no handler
    (including ones installed by others) receives a request line with a token in its path."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(existing, RedactingFilter) for existing in logger.filters):
            logger.addFilter(RedactingFilter())


def _redact_value(value: object) -> object:
    return redact(value) if isinstance(value, str) else value


def _redacted_json_value(value: object) -> object:
    """`value` made JSON-ready with every string in it redacted."""
    if isinstance(value, dict):
        return {str(key): _redacted_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted_json_value(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value))
