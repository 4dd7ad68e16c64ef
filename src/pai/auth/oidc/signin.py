"""A sign-in through the OpenID Connect provider, in three steps that each consume the last:

1. `begin`: the client (the portal, `pai login`) names where it wants the browser back and the
   S256 challenge of a verifier it keeps; PAI records the sign-in under a random `state` and
   sends the browser to the provider (authorization code flow with PKCE and a nonce).
2. `claim` then `vouch`: the provider sends the browser back with its code and the state. The
   state is used up at once (a second use, or an unknown one, is refused); PAI exchanges the
   code, checks the ID token, creates or updates the user, and hands the browser a login code
   for the client, valid for two minutes.
3. `redeem`: the client shows the login code with its verifier and gets a PAI token. The code
   is used up whatever the outcome.

Nothing a step needs lives in a server's memory, so any API worker can serve any step.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from pai import pkce
from pai.auth.external import ExternalIdentity, sign_in_external
from pai.auth.oidc.idtoken import verify_id_token
from pai.auth.oidc.provider import OidcProvider
from pai.auth.sealing import SecretBox
from pai.errors import InvalidParametersError, UnauthorizedUserError
from pai.store.models import SignIn
from pai.store.types import utcnow

SOURCE = "oidc"
SIGN_IN_LIFETIME = timedelta(minutes=10)
"""From the redirect to the provider to its answer: time to type a password and a second factor."""
LOGIN_CODE_LIFETIME = timedelta(minutes=2)


@dataclass(frozen=True)
class ClaimedSignIn:
    """A sign-in whose state the provider's answer used up."""

    id: int
    nonce: str
    verifier: str
    redirect_uri: str
    """Where the browser goes next (checked when the sign-in began)."""


@dataclass(frozen=True)
class LoginCode:
    """A used-up login code: whom it was for, and the client's challenge."""

    user_id: int | None
    code_challenge: str
    expires_at: datetime


class OidcSignIn:
    """Signs people in through one provider."""

    def __init__(
        self,
        provider: OidcProvider,
        box: SecretBox,
        *,
        admin_groups: Sequence[str] = (),
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.provider = provider
        self._box = box
        self._admin_groups = tuple(admin_groups)
        self._clock = clock

    def begin(
        self, session: Session, *, callback: str, redirect_uri: str, code_challenge: str
    ) -> str:
        """Record a sign-in; the provider's address to send the browser to. `callback` is
        PAI's own return address, `redirect_uri` the client's (already checked)."""
        if not _is_challenge(code_challenge):
            raise InvalidParametersError(
                "code_challenge: must be the S256 challenge of a PKCE verifier (43 characters "
                "of base64url)"
            )
        now = self._clock()
        session.execute(delete(SignIn).where(SignIn.expires_at <= now))
        state, nonce, verifier = (
            secrets.token_urlsafe(32),
            secrets.token_urlsafe(32),
            pkce.new_verifier(),
        )
        session.add(
            SignIn(
                state_hash=_digest(state),
                nonce=nonce,
                sealed_verifier=self._box.seal({"verifier": verifier}),
                redirect_uri=redirect_uri,
                code_challenge=code_challenge,
                expires_at=now + SIGN_IN_LIFETIME,
            )
        )
        session.flush()
        return self.provider.authorization_url(
            redirect_uri=callback, state=state, nonce=nonce, code_challenge=pkce.challenge(verifier)
        )

    def claim(self, session: Session, state: str) -> ClaimedSignIn:
        """Use up `state`; InvalidParametersError if it is unknown, used or expired."""
        now = self._clock()
        claimed = session.execute(
            update(SignIn)
            .where(SignIn.state_hash == _digest(state), SignIn.expires_at > now)
            .values(state_hash=None)
            .returning(SignIn.id, SignIn.nonce, SignIn.sealed_verifier, SignIn.redirect_uri)
        ).one_or_none()
        if claimed is None:
            raise InvalidParametersError(
                "state: this sign-in is unknown, already finished or expired; start it again"
            )
        identifier, nonce, sealed, redirect_uri = claimed
        return ClaimedSignIn(identifier, nonce, self._box.open(sealed)["verifier"], redirect_uri)

    def identify(self, claimed: ClaimedSignIn, *, code: str, callback: str) -> ExternalIdentity:
        """Exchange the provider's `code` and check its ID token: who signed in."""
        tokens = self.provider.redeem(code=code, verifier=claimed.verifier, redirect_uri=callback)
        metadata = self.provider.metadata()
        claims = verify_id_token(
            tokens.id_token,
            find_key=self.provider.find_key,
            issuer=self.provider.settings.issuer,
            client_id=self.provider.settings.client_id,
            nonce=claimed.nonce,
            algorithms=metadata.signing_algorithms,
        )
        settings = self.provider.settings
        wanted = (settings.username_claim, settings.groups_claim)
        if tokens.access_token and any(name not in claims for name in wanted):
            userinfo = self.provider.userinfo(tokens.access_token)
            if userinfo.get("sub") == claims["sub"]:
                claims = {**userinfo, **claims}
        return self.person(claims)

    def person(self, claims: dict[str, Any]) -> ExternalIdentity:
        """The person the checked `claims` describe."""
        settings = self.provider.settings
        name = claims.get(settings.username_claim)
        if not isinstance(name, str) or not name:
            raise UnauthorizedUserError(
                f"the provider did not say who signed in: no {settings.username_claim!r} claim "
                "(PAI_OIDC_USERNAME_CLAIM)"
            )
        groups = claims.get(settings.groups_claim) or []
        if isinstance(groups, str):
            groups = [groups]
        email = claims.get(settings.email_claim)
        return ExternalIdentity(
            username=name.split("@", 1)[0],
            source=SOURCE,
            email=email if isinstance(email, str) else "",
            groups=frozenset(str(group) for group in groups if isinstance(group, str | int)),
        )

    def vouch(self, session: Session, claimed: ClaimedSignIn, person: ExternalIdentity) -> str:
        """Create or update the user and give their sign-in a login code; the client's
        redirect URI is `claimed.redirect_uri` with `?code=`."""
        user = sign_in_external(session, person, admin_groups=self._admin_groups)
        code = secrets.token_urlsafe(32)
        session.execute(
            update(SignIn)
            .where(SignIn.id == claimed.id)
            .values(
                code_hash=_digest(code),
                user_id=user.id,
                expires_at=self._clock() + LOGIN_CODE_LIFETIME,
            )
        )
        return code

    def forget(self, session: Session, claimed: ClaimedSignIn) -> None:
        """Drop a sign-in that failed after its state was used."""
        session.execute(delete(SignIn).where(SignIn.id == claimed.id))

    def take_code(self, session: Session, code: str) -> LoginCode | None:
        """Use up the login code `code` (whatever `check` then says about it)."""
        taken = session.execute(
            delete(SignIn)
            .where(SignIn.code_hash == _digest(code))
            .returning(SignIn.user_id, SignIn.code_challenge, SignIn.expires_at)
        ).one_or_none()
        return None if taken is None else LoginCode(*taken)

    def check(self, taken: LoginCode | None, verifier: str) -> int:
        """The id of the user the login code was for, if `verifier` is the client's."""
        if taken is None or taken.user_id is None or taken.expires_at <= self._clock():
            raise UnauthorizedUserError(
                "the login code is unknown, already used or expired; sign in again"
            )
        if not pkce.verifies(verifier, taken.code_challenge):
            raise UnauthorizedUserError(
                "the code verifier does not match the sign-in's challenge; sign in again"
            )
        return taken.user_id


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _is_challenge(value: str) -> bool:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    return len(value) == 43 and set(value) <= alphabet
