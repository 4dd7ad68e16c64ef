"""How people sign in: PAI's own passwords, an OpenID Connect provider or an LDAP directory.

Read from `PAI_AUTHN_*`, `PAI_OIDC_*` and `PAI_LDAP_*` (see `Settings` and docs/deploy.md).
The client secret and the bind password are `Secret`s: they print as asterisks, so no log line,
error message or `repr` can show them by accident.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pai.errors import ConfigurationError

AUTHN_MODES = ("basic", "oidc", "ldap")
DEFAULT_OIDC_SCOPES = ("openid", "profile", "email")
DEFAULT_USER_FILTER = "(uid={username})"
DEFAULT_GROUP_FILTER = "(|(member={dn})(uniqueMember={dn}))"


class Secret:
    """A credential PAI must use but never show: `str()` and `repr()` give asterisks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The clear value, for the one call that sends it to the provider or directory."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    def __str__(self) -> str:
        return "********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class OidcSettings:
    """An OpenID Connect provider and this cluster's client registration with it."""

    issuer: str
    client_id: str
    client_secret: Secret
    scopes: tuple[str, ...] = DEFAULT_OIDC_SCOPES
    username_claim: str = "preferred_username"
    email_claim: str = "email"
    groups_claim: str = "groups"
    provider_name: str = ""
    """Shown on the portal's button: "Sign in with <provider_name>"; default: the issuer's host."""

    @property
    def display_name(self) -> str:
        return self.provider_name or (urlsplit(self.issuer).hostname or self.issuer)

    def __post_init__(self) -> None:
        _require_secure_url("PAI_OIDC_ISSUER", self.issuer, ("https", "http"), insecure="http")
        if not self.client_id:
            raise ConfigurationError("PAI_OIDC_CLIENT_ID: required with PAI_AUTHN_MODE=oidc")
        if not self.client_secret.reveal():
            raise ConfigurationError("PAI_OIDC_CLIENT_SECRET: required with PAI_AUTHN_MODE=oidc")
        if "openid" not in self.scopes:
            raise ConfigurationError("PAI_OIDC_SCOPES: must include openid")


@dataclass(frozen=True)
class LdapSettings:
    """An LDAP directory: where users and groups are, and the service account that finds them."""

    url: str
    bind_dn: str
    bind_password: Secret
    user_base: str
    user_filter: str = DEFAULT_USER_FILTER
    group_base: str = ""
    """Where groups are searched (`group_filter`); empty: the user's `memberOf` values."""
    group_filter: str = DEFAULT_GROUP_FILTER
    start_tls: bool = False
    ca_file: Path | None = None
    email_attribute: str = "mail"
    timeout: float = 10.0

    def __post_init__(self) -> None:
        insecure = None if self.start_tls else "ldap"
        _require_secure_url("PAI_LDAP_URL", self.url, ("ldaps", "ldap"), insecure=insecure)
        if not self.user_base:
            raise ConfigurationError("PAI_LDAP_USER_BASE: required with PAI_AUTHN_MODE=ldap")
        if "{username}" not in self.user_filter:
            raise ConfigurationError(
                f"PAI_LDAP_USER_FILTER: must contain {{username}}, got {self.user_filter!r}"
            )
        if self.group_base and "{dn}" not in self.group_filter:
            raise ConfigurationError(
                f"PAI_LDAP_GROUP_FILTER: must contain {{dn}}, got {self.group_filter!r}"
            )
        if self.ca_file is not None and not self.ca_file.is_file():
            raise ConfigurationError(f"PAI_LDAP_CA_FILE: {self.ca_file} is not a file")


@dataclass(frozen=True)
class AuthnSettings:
    """The sign-in mode and its provider; `admin_groups` are directory groups (OIDC group
    values, LDAP group DNs or cns) whose members administer the cluster."""

    mode: str = "basic"
    admin_groups: tuple[str, ...] = ()
    oidc: OidcSettings | None = field(default=None)
    ldap: LdapSettings | None = field(default=None)

    def __post_init__(self) -> None:
        if self.mode not in AUTHN_MODES:
            raise ConfigurationError(
                f"PAI_AUTHN_MODE: must be one of {', '.join(AUTHN_MODES)}, got {self.mode!r}"
            )
        if self.mode == "oidc" and self.oidc is None:
            raise ConfigurationError("PAI_AUTHN_MODE=oidc needs PAI_OIDC_ISSUER")
        if self.mode == "ldap" and self.ldap is None:
            raise ConfigurationError("PAI_AUTHN_MODE=ldap needs PAI_LDAP_URL")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthnSettings:
        mode = (env.get("PAI_AUTHN_MODE") or "basic").lower()
        return cls(
            mode=mode,
            admin_groups=_list(env, "PAI_AUTHN_ADMIN_GROUPS", ";"),
            oidc=_oidc_from_env(env) if mode == "oidc" else None,
            ldap=_ldap_from_env(env) if mode == "ldap" else None,
        )


def _oidc_from_env(env: Mapping[str, str]) -> OidcSettings:
    return OidcSettings(
        issuer=(env.get("PAI_OIDC_ISSUER") or "").rstrip("/"),
        client_id=env.get("PAI_OIDC_CLIENT_ID") or "",
        client_secret=Secret(env.get("PAI_OIDC_CLIENT_SECRET") or ""),
        scopes=_list(env, "PAI_OIDC_SCOPES", " ") or DEFAULT_OIDC_SCOPES,
        username_claim=env.get("PAI_OIDC_USERNAME_CLAIM") or OidcSettings.username_claim,
        email_claim=env.get("PAI_OIDC_EMAIL_CLAIM") or OidcSettings.email_claim,
        groups_claim=env.get("PAI_OIDC_GROUPS_CLAIM") or OidcSettings.groups_claim,
        provider_name=env.get("PAI_OIDC_PROVIDER_NAME") or "",
    )


def _ldap_from_env(env: Mapping[str, str]) -> LdapSettings:
    start_tls = (env.get("PAI_LDAP_START_TLS") or "false").lower()
    if start_tls not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigurationError(f"PAI_LDAP_START_TLS: expected true or false, got {start_tls!r}")
    timeout = env.get("PAI_LDAP_TIMEOUT") or "10"
    try:
        seconds = float(timeout)
    except ValueError:
        raise ConfigurationError(f"PAI_LDAP_TIMEOUT: expected seconds, got {timeout!r}") from None
    return LdapSettings(
        url=env.get("PAI_LDAP_URL") or "",
        bind_dn=env.get("PAI_LDAP_BIND_DN") or "",
        bind_password=Secret(env.get("PAI_LDAP_BIND_PASSWORD") or ""),
        user_base=env.get("PAI_LDAP_USER_BASE") or "",
        user_filter=env.get("PAI_LDAP_USER_FILTER") or DEFAULT_USER_FILTER,
        group_base=env.get("PAI_LDAP_GROUP_BASE") or "",
        group_filter=env.get("PAI_LDAP_GROUP_FILTER") or DEFAULT_GROUP_FILTER,
        start_tls=start_tls in ("true", "1", "yes"),
        ca_file=Path(env["PAI_LDAP_CA_FILE"]) if env.get("PAI_LDAP_CA_FILE") else None,
        email_attribute=env.get("PAI_LDAP_EMAIL_ATTRIBUTE") or LdapSettings.email_attribute,
        timeout=seconds,
    )


def _list(env: Mapping[str, str], name: str, separator: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in (env.get(name) or "").split(separator) if part.strip())


def _require_secure_url(
    name: str, url: str, schemes: tuple[str, ...], *, insecure: str | None
) -> None:
    """`url` must use one of `schemes`; the clear-text scheme `insecure` only towards this
    machine (a provider or directory started next to PAI, as in a trial), since passwords
    and tokens would otherwise cross the network in clear."""
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.hostname:
        raise ConfigurationError(
            f"{name}: expected a {' or '.join(s + '://' for s in schemes)} URL, got {url!r}"
        )
    if parts.scheme == insecure and not _is_loopback(parts.hostname):
        raise ConfigurationError(
            f"{name}: {url!r} would send credentials in clear over the network; use "
            + ("https://" if insecure == "http" else "ldaps:// or PAI_LDAP_START_TLS=true")
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
