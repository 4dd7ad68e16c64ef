"""Passwords checked by an LDAP directory, and the person's groups read from it.

A service account finds the user's entry (`PAI_LDAP_USER_FILTER` under `PAI_LDAP_USER_BASE`),
then PAI binds as that entry with the password given: only the directory sees the password,
PAI stores nothing of it. The user name is escaped before it enters the filter (RFC 4515), so
`*` or `)(` in a name are characters of the name, never filter syntax. Groups are the entry's
`memberOf` values, or a search for the groups (`groupOfNames`, `groupOfUniqueNames`) that list
the entry's DN as a member under `PAI_LDAP_GROUP_BASE`.
"""

from __future__ import annotations

import logging
import math
import ssl
from typing import Any

from ldap3 import NONE, SUBTREE, Connection, Server, Tls
from ldap3.core.exceptions import LDAPException, LDAPInvalidDnError
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import parse_dn

from pai.auth.external import ExternalIdentity
from pai.authn_settings import LdapSettings
from pai.errors import IncorrectPasswordError, NoUserError, ServiceUnavailableError

SOURCE = "ldap"
INVALID_CREDENTIALS = 49
"""The LDAP result code of a bind with a wrong password (RFC 4511)."""

logger = logging.getLogger(__name__)


def fold_name(name: str) -> str:
    """A group DN or cn as compared: attribute types and values regardless of case, spaces
    around separators ignored (`CN=Vision, ou=Groups` names the group `cn=vision,ou=groups`)."""
    try:
        parts = parse_dn(name.strip())
    except LDAPInvalidDnError:
        return name.strip().casefold()
    if not parts:
        return name.strip().casefold()
    return ",".join(
        f"{kind.strip().lower()}={value.strip().casefold()}" for kind, value, _ in parts
    )


def common_name(dn: str) -> str | None:
    """The value of the first RDN of `dn` (a group's cn), if `dn` is a DN."""
    try:
        parts = parse_dn(dn)
    except LDAPInvalidDnError:
        return None
    return parts[0][1] if parts else None


class LdapDirectory:
    """Checks passwords against one directory; a connection per sign-in (none is kept)."""

    def __init__(self, settings: LdapSettings) -> None:
        self._settings = settings
        tls = Tls(
            validate=ssl.CERT_REQUIRED,
            ca_certs_file=str(settings.ca_file) if settings.ca_file else None,
        )
        self._server = Server(
            settings.url, tls=tls, get_info=NONE, connect_timeout=settings.timeout
        )

    def authenticate(self, username: str, password: str) -> ExternalIdentity:
        """The person whose password this is; NoUserError if the directory has no such user,
        IncorrectPasswordError if the password is wrong, ServiceUnavailableError if the
        directory cannot be asked."""
        if not password:
            # An empty password makes an "unauthenticated bind", which succeeds as anonymous.
            raise IncorrectPasswordError("the password is incorrect")
        try:
            service = self._connect(self._settings.bind_dn, self._settings.bind_password.reveal())
            with service:
                dn, entry = self._find_user(service, username)
                self._check_password(dn, password)
                groups = self._groups(service, dn, entry)
        except LDAPException as failure:
            logger.warning(
                "LDAP directory %s failed: %s", self._settings.url, type(failure).__name__
            )
            raise ServiceUnavailableError(
                f"the LDAP directory at {self._settings.url} cannot be asked: "
                f"{type(failure).__name__}; try again later or ask an administrator"
            ) from None
        email = _first(entry.get(self._settings.email_attribute))
        return ExternalIdentity(
            username=username,
            source=SOURCE,
            email=email or "",
            groups=frozenset(fold_name(name) for name in groups),
            fold=fold_name,
        )

    def _connect(self, user: str, password: str) -> Connection:
        """A bound connection (StartTLS first when configured); LDAPException if the bind
        fails for any reason but a wrong password."""
        connection = Connection(
            self._server,
            user=user,
            password=password,
            receive_timeout=math.ceil(self._settings.timeout),
            read_only=True,
            raise_exceptions=False,
        )
        connection.open()
        if self._settings.start_tls and not connection.start_tls():
            connection.unbind()
            raise _BindRefused(f"StartTLS refused by {self._settings.url}")
        if not connection.bind():
            code = connection.result.get("result")
            connection.unbind()
            if code == INVALID_CREDENTIALS and user != self._settings.bind_dn:
                raise IncorrectPasswordError("the password is incorrect")
            raise _BindRefused(f"bind as {user} refused (LDAP result {code})")
        return connection

    def _find_user(self, service: Connection, username: str) -> tuple[str, dict[str, Any]]:
        query = self._settings.user_filter.format(username=escape_filter_chars(username))
        attributes = [self._settings.email_attribute, "memberOf"]
        service.search(self._settings.user_base, query, SUBTREE, attributes=attributes)
        found = [item for item in service.response or () if item.get("type") == "searchResEntry"]
        if not found:
            raise NoUserError(f"user '{username}' does not exist in the directory", status=400)
        if len(found) > 1:
            logger.warning("LDAP: %d entries match the user filter for one name", len(found))
            raise NoUserError(
                f"several directory entries match '{username}'; ask an administrator to "
                "narrow PAI_LDAP_USER_FILTER",
                status=400,
            )
        return found[0]["dn"], dict(found[0].get("attributes") or {})

    def _check_password(self, dn: str, password: str) -> None:
        self._connect(dn, password).unbind()

    def _groups(self, service: Connection, dn: str, entry: dict[str, Any]) -> set[str]:
        """The DNs and cns of the user's groups."""
        if self._settings.group_base:
            query = self._settings.group_filter.format(dn=escape_filter_chars(dn))
            service.search(self._settings.group_base, query, SUBTREE, attributes=["cn"])
            found = [
                item for item in service.response or () if item.get("type") == "searchResEntry"
            ]
            names = {item["dn"] for item in found}
            names |= {cn for item in found for cn in _values(item["attributes"].get("cn"))}
            return names
        member_of = _values(entry.get("memberOf"))
        return set(member_of) | {cn for cn in map(common_name, member_of) if cn}


class _BindRefused(LDAPException):
    """The service account's bind failed: the directory or PAI's settings are wrong."""


def _values(attribute: Any) -> list[str]:
    if attribute is None:
        return []
    if isinstance(attribute, str):
        return [attribute]
    return [str(value) for value in attribute]


def _first(attribute: Any) -> str | None:
    values = _values(attribute)
    return values[0] if values else None
