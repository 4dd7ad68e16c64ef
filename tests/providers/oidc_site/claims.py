"""What the test provider says about a person: their user name and e-mail (standard claims)
and their groups (`groups`, as Entra ID and Keycloak can be configured to send)."""

import time

from oidc_site.tampering import mode


def userinfo(claims, user):
    claims["preferred_username"] = user.username
    claims["email"] = user.email
    claims["name"] = user.get_full_name() or user.username
    return claims


def id_token_hook(id_token, user, token, request, **kwargs):
    id_token["groups"] = sorted(group.name for group in user.groups.all())
    # A provider that issues tokens PAI must refuse, as the test asks (see `tampering`).
    current = mode()
    if current == "expired":
        now = int(time.time())
        id_token["iat"], id_token["exp"] = now - 1200, now - 600
    elif current == "audience":
        id_token["aud"] = "another-client"
    elif current == "nonce":
        id_token["nonce"] = "not-this-sign-in"
    return id_token
