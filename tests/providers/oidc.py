"""An OpenID Connect provider for tests: django-oidc-provider (from PyPI) served by Django on a
free loopback port, with its own database in the test's directory, in a process of its own,
stopped when the test ends. Its sign-in page is a plain form (Account, Secret, Continue).

The administrator's commands (`oidc_site/admin.py`) run as processes too: registering PAI as a
client, creating people with their groups, deleting them. `tamper(mode)` makes it issue the bad
ID tokens of `oidc_site/tampering.py`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from providers.processes import free_port, stop

HERE = Path(__file__).parent
STARTUP_SECONDS = 60.0
CLIENT_ID = "pai-cluster"
DATABASE = "provider.db"
"""The provider's SQLite database in its state folder (oidc_site/settings.py)."""
PROVIDER_NAME = "Example Identity"


def available() -> bool:
    return all(importlib.util.find_spec(name) for name in ("django", "oidc_provider"))


@dataclass
class OidcProvider:
    site: str
    state: Path
    env: dict[str, str] = field(repr=False)
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)

    @property
    def issuer(self) -> str:
        return f"{self.site}/openid"

    def admin(self, *arguments: str) -> None:
        """Run one of `oidc_site/admin.py`'s commands."""
        subprocess.run(
            [sys.executable, "-m", "oidc_site.admin", *arguments],
            cwd=HERE,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def register(self, pai_base_url: str) -> None:
        """Register the PAI at `pai_base_url` as the confidential client `CLIENT_ID`."""
        self.admin(
            "client",
            CLIENT_ID,
            self.client_secret,
            f"{pai_base_url}/api/v2/authn/oidc/return",
            f"{pai_base_url}/login",
        )

    def person(self, name: str, password: str, *groups: str) -> None:
        """Create or update a person; their groups become exactly `groups`."""
        self.admin("user", name, password, *groups)

    def delete(self, name: str) -> None:
        self.admin("delete", name)

    def tamper(self, mode: str) -> None:
        """Issue bad ID tokens from now on (`tampering.py`); "" for good ones again."""
        (self.state / "tamper").write_text(mode)

    def settings_env(self, **overrides: str) -> dict[str, str]:
        """The `PAI_OIDC_*` variables of a PAI that signs in through this provider."""
        return {
            "PAI_AUTHN_MODE": "oidc",
            "PAI_OIDC_ISSUER": self.issuer,
            "PAI_OIDC_CLIENT_ID": CLIENT_ID,
            "PAI_OIDC_CLIENT_SECRET": self.client_secret,
            "PAI_OIDC_PROVIDER_NAME": PROVIDER_NAME,
            **overrides,
        }


def _provider(state: Path, site: str) -> OidcProvider:
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("PAI_")},
        "PYTHONPATH": str(HERE),
        "DJANGO_SETTINGS_MODULE": "oidc_site.settings",
        "OIDC_SITE_STATE": str(state),
        "OIDC_SITE_URL": site,
        "OIDC_SITE_SECRET_KEY": secrets.token_urlsafe(40),
    }
    return OidcProvider(site, state, env)


def set_up_database(state: Path) -> Path:
    """A provider's database with its tables and signing key, made in `state` (the slow part of
    a provider's start: Django's migrations); `running_provider` starts from a copy of it."""
    state.mkdir(parents=True, exist_ok=True)
    _provider(state, "http://127.0.0.1").admin("setup")
    return state / DATABASE


@contextmanager
def running_provider(state: Path, database: Path) -> Iterator[OidcProvider]:
    """A provider on a free port whose database starts as a copy of `database`
    (`set_up_database`)."""
    state.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(database, state / DATABASE)
    port = free_port()
    provider = _provider(state, f"http://127.0.0.1:{port}")
    log = (state / "provider.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=HERE,
        env=provider.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_ready(provider, process, state / "provider.log")
        yield provider
    finally:
        stop(process)
        log.close()


def _wait_ready(provider: OidcProvider, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    discovery = f"{provider.issuer}/.well-known/openid-configuration"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the OIDC provider exited:\n{log.read_text()}")
        try:
            if httpx.get(discovery, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the OIDC provider did not start:\n{log.read_text()}")


def sign_in_over_http(
    start: str, name: str, password: str, *, stop_at: str, client: httpx.Client | None = None
) -> httpx.URL:
    """Follow a sign-in from `start` (PAI's /oidc/login) through the provider's sign-in form,
    as a browser would, until a redirect leads to an address starting with `stop_at` (the
    client's redirect URI); that address."""
    browser = client or httpx.Client(timeout=30)
    url = httpx.URL(start)
    for _ in range(20):
        if str(url).startswith(stop_at):
            return url
        response = browser.get(url)
        if response.status_code == 200 and 'name="csrfmiddlewaretoken"' in response.text:
            token = response.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"')[0]
            nxt = response.text.split('name="next" value="', 1)[1].split('"')[0]
            response = browser.post(
                url,
                data={
                    "csrfmiddlewaretoken": token,
                    "username": name,
                    "password": password,
                    "next": nxt.replace("&amp;", "&"),
                },
            )
        if response.status_code not in (301, 302, 303):
            raise AssertionError(f"{url} answered {response.status_code}: {response.text[:500]}")
        url = url.join(response.headers["location"])
    raise AssertionError("the sign-in did not come back")
