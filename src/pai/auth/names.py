"""What user names and e-mail addresses may look like, wherever users come from (the API, an
OpenID Connect provider, an LDAP directory)."""

from __future__ import annotations

import re

USERNAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
r"""OpenPAI's `^[\w.-]+$` as its server (JavaScript) reads it: `\w` is ASCII there, and not in
Python or Rust."""
MAX_USERNAME_LENGTH = 64
_EMAIL_PART = r"[^@\x00-\x20\x7f-\x9f]+"
r"""No `@`, space or control character; spelled out because `\s` means different characters
in the regular expressions of Python, of pydantic (Rust) and of OpenAPI tools (ECMAScript)."""
EMAIL_PATTERN = f"^$|^{_EMAIL_PART}@{_EMAIL_PART}\\.{_EMAIL_PART}$"


def is_username(name: str) -> bool:
    return len(name) <= MAX_USERNAME_LENGTH and re.fullmatch(USERNAME_PATTERN, name) is not None


def is_email(address: str) -> bool:
    return len(address) <= 254 and re.fullmatch(EMAIL_PATTERN, address) is not None
