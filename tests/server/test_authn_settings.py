"""The sign-in settings: what they accept, what they refuse with the variable's name, and
secrets that never print."""

from __future__ import annotations

import pytest

from pai.authn_settings import AuthnSettings, Secret
from pai.errors import ConfigurationError
from pai.settings import Settings

OIDC = {
    "PAI_AUTHN_MODE": "oidc",
    "PAI_OIDC_ISSUER": "https://login.example.org/tenant/v2.0/",
    "PAI_OIDC_CLIENT_ID": "pai",
    "PAI_OIDC_CLIENT_SECRET": "client-secret-value",
}
LDAP = {
    "PAI_AUTHN_MODE": "ldap",
    "PAI_LDAP_URL": "ldaps://ldap.example.org",
    "PAI_LDAP_BIND_DN": "cn=pai,dc=example,dc=org",
    "PAI_LDAP_BIND_PASSWORD": "bind-password-value",
    "PAI_LDAP_USER_BASE": "ou=people,dc=example,dc=org",
}


def test_basic_is_the_default() -> None:
    assert AuthnSettings.from_env({}) == AuthnSettings()


def test_oidc_settings_are_read_with_their_defaults() -> None:
    oidc = AuthnSettings.from_env(OIDC).oidc
    assert oidc is not None
    assert oidc.issuer == "https://login.example.org/tenant/v2.0"
    assert (oidc.scopes, oidc.groups_claim) == (("openid", "profile", "email"), "groups")
    assert oidc.display_name == "login.example.org"


def test_admin_groups_are_separated_by_semicolons_since_dns_have_commas() -> None:
    env = {**LDAP, "PAI_AUTHN_ADMIN_GROUPS": "cn=admins,ou=groups,dc=example,dc=org; ops"}
    assert AuthnSettings.from_env(env).admin_groups == (
        "cn=admins,ou=groups,dc=example,dc=org",
        "ops",
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PAI_AUTHN_MODE": "saml"}, "PAI_AUTHN_MODE: must be one of basic, oidc, ldap"),
        ({**OIDC, "PAI_OIDC_ISSUER": "http://login.example.org"}, "PAI_OIDC_ISSUER: 'http://"),
        ({**OIDC, "PAI_OIDC_CLIENT_SECRET": ""}, "PAI_OIDC_CLIENT_SECRET: required"),
        ({**OIDC, "PAI_OIDC_SCOPES": "profile email"}, "PAI_OIDC_SCOPES: must include openid"),
        ({**LDAP, "PAI_LDAP_URL": "ldap://ldap.example.org"}, "in clear over the network"),
        ({**LDAP, "PAI_LDAP_USER_FILTER": "(uid=alice)"}, "must contain {username}"),
        ({**LDAP, "PAI_LDAP_USER_BASE": ""}, "PAI_LDAP_USER_BASE: required"),
        ({**LDAP, "PAI_LDAP_START_TLS": "maybe"}, "PAI_LDAP_START_TLS: expected true or false"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AuthnSettings.from_env(env)


def test_clear_text_ldap_is_allowed_with_start_tls_or_on_this_machine() -> None:
    assert AuthnSettings.from_env(
        {**LDAP, "PAI_LDAP_URL": "ldap://ldap.example.org", "PAI_LDAP_START_TLS": "true"}
    ).ldap
    assert AuthnSettings.from_env({**LDAP, "PAI_LDAP_URL": "ldap://127.0.0.1:3389"}).ldap


def test_secrets_never_print() -> None:
    settings = Settings.from_env({"PAI_HOME": "/tmp/pai-settings-test", **OIDC})
    shown = f"{settings!r} {settings.authn} {settings.authn.oidc}"
    assert "client-secret-value" not in shown
    assert str(Secret("x")) == "********"
    ldap = AuthnSettings.from_env(LDAP)
    assert "bind-password-value" not in repr(ldap)
    assert ldap.ldap is not None and ldap.ldap.bind_password.reveal() == "bind-password-value"
