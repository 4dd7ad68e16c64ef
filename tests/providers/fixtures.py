"""Fixtures of the organisation's directories (registered for the suite by tests/conftest.py):
`slapd` (OpenLDAP, `providers.slapd`) and `oidc_provider` (django-oidc-provider,
`providers.oidc`), each started for one test in its directory and stopped after it (the OpenID
Connect provider from a copy of a database set up once per test process)."""

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


@pytest.fixture(scope="session")
def oidc_database(
    tmp_path_factory: pytest.TempPathFactory, requirement: Callable[[bool, str], None]
) -> Path:
    """A provider's database, set up once per test process; each provider starts from a copy."""
    requirement(
        oidc.available(), "django-oidc-provider is not installed (pip install -e '.[test]')"
    )
    return oidc.set_up_database(tmp_path_factory.mktemp("oidc-database"))


@pytest.fixture
def oidc_provider(tmp_path: Path, oidc_database: Path) -> Iterator[oidc.OidcProvider]:
    with oidc.running_provider(tmp_path / "oidc-provider", oidc_database) as provider:
        yield provider
