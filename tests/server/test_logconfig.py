"""Log redaction and the JSON line format."""

from __future__ import annotations

import io
import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pai.server.logconfig import _PATTERNS, RedactingFilter, configure_logging, redact

TOKEN = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1c2VybmFtZSI6ImFsaWNlIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"DELETE /api/v2/tokens/{TOKEN}", "DELETE /api/v2/tokens/[REDACTED]"),
        ("Authorization: Bearer abc.def", "Authorization: Bearer [REDACTED]"),
        ("authorization=Basic YWxpY2U6dG9rZW4=", "authorization=Basic [REDACTED]"),
        ('{"username": "a", "password": "hunter2"}', '{"username": "a", "password": [REDACTED]}'),
        ("oldPassword='hunter2', x=1", "oldPassword=[REDACTED], x=1"),
        ("newPassword=hunter2&next=1", "newPassword=[REDACTED]&next=1"),
        ("hash $argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA stored", "hash [REDACTED] stored"),
        ("GET /api/v2/users 200", "GET /api/v2/users 200"),
    ],
)
def test_redact_blanks_secret_shaped_text(text: str, expected: str) -> None:
    assert redact(text) == expected


SECRET_SHAPED_PARTS = [
    TOKEN,
    "BEARER abc",
    "basic\tYWxpY2U=",
    "Password=x",
    "PASSWD: 'y'",
    "api_Secret=z",
    '"refreshToken": "t"',
    "$argon2id$v=19$m=1$c2FsdA$aGFzaA",
    "GET /api/v2/jobs",
    " ",
    ", ",
]


@given(st.lists(st.sampled_from(SECRET_SHAPED_PARTS) | st.text(max_size=8), max_size=6))
def test_the_quick_check_never_lets_secret_shaped_text_through(parts: list[str]) -> None:
    """`redact` skips text that its one quick search finds nothing in; the result must be what
    applying every pattern gives."""
    text = "".join(parts)
    every_pattern = text
    for pattern, replacement in _PATTERNS:
        every_pattern = pattern.sub(replacement, every_pattern)
    assert redact(text) == every_pattern


def test_lines_are_json_with_extras_and_redacted_fields() -> None:
    stream = io.StringIO()
    handler = configure_logging("INFO", stream)
    try:
        logging.getLogger("pai.test").info(
            "calling %s", f"/tokens/{TOKEN}", extra={"request_id": "r1", "status": 200}
        )
        try:
            raise ValueError("password=hunter2")
        except ValueError:
            logging.getLogger("pai.test").exception("failed")
    finally:
        logging.getLogger().removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "calling /tokens/[REDACTED]"
    assert (first["level"], first["logger"], first["request_id"], first["status"]) == (
        "INFO",
        "pai.test",
        "r1",
        200,
    )
    assert "ValueError: password=[REDACTED]" in second["exception"]
    assert "hunter2" not in stream.getvalue()


def test_the_filter_keeps_the_shape_of_arguments() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s" %d',
        ("1.2.3.4", "GET", TOKEN, 200),
        None,
    )
    assert RedactingFilter().filter(record)
    assert record.args == ("1.2.3.4", "GET", "[REDACTED]", 200)
