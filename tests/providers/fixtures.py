"""Fixtures of the organisation's directories (registered for the suite by tests/conftest.py):
`slapd` (OpenLDAP, `providers.slapd`) and `oidc_provider` (django-oidc-provider,
`providers.oidc`), each started for one test in its directory and stopped after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from providers import oidc, slapd


@pytest.fixture
def ldap_directory(
    tmp_path: Path, requirement: Callable[[bool, str], None]
) -> Iterator[slapd.Slapd]:
    requirement(
        slapd.available(), "OpenLDAP's slapd is not installed (apt-get install slapd ldap-utils)"
    )
    with slapd.running_slapd(tmp_path / "slapd") as directory:
        yield directory


@pytest.fixture
def oidc_provider(
    tmp_path: Path, requirement: Callable[[bool, str], None]
) -> Iterator[oidc.OidcProvider]:
    requirement(
        oidc.available(), "django-oidc-provider is not installed (pip install -e '.[test]')"
    )
    with oidc.running_provider(tmp_path / "oidc-provider") as provider:
        yield provider
