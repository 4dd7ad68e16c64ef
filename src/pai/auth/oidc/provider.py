"""The OpenID Connect provider as PAI talks to it: discovery, keys, the token endpoint and
userinfo, over HTTPS (plain HTTP only to a provider on this machine, see `authn_settings`).

Discovery (`<issuer>/.well-known/openid-configuration`) and the keys are read on first use and
kept for an hour; a token signed with a key not seen yet makes PAI read the keys again (the
provider rotated them), at most once a minute.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import jwt

from pai.auth.oidc.idtoken import IdTokenRefused
from pai.authn_settings import OidcSettings
from pai.errors import ServiceUnavailableError, UnauthorizedUserError

DISCOVERY_PATH = "/.well-known/openid-configuration"
METADATA_SECONDS = 3600.0
KEY_REFRESH_SECONDS = 60.0
TIMEOUT_SECONDS = 10.0
REQUIRED_METADATA = ("authorization_endpoint", "token_endpoint", "jwks_uri")

_Key = tuple[str | None, jwt.PyJWK]
"""A published key and the algorithm it declares (`alg`), if it declares one."""


@dataclass(frozen=True)
class ProviderMetadata:
    """What discovery says about the provider."""

    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None
    end_session_endpoint: str | None
    signing_algorithms: tuple[str, ...]
    client_authentication: str
    """`client_secret_basic` or `client_secret_post`."""


@dataclass(frozen=True)
class ProviderTokens:
    """The token endpoint's answer."""

    id_token: str = field(repr=False)
    access_token: str | None = field(repr=False)


class OidcProvider:
    """One provider, shared by the requests of one server (thread-safe)."""

    def __init__(
        self,
        settings: OidcSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._http = httpx.Client(timeout=TIMEOUT_SECONDS, transport=transport)
        self._clock = clock
        self._lock = threading.Lock()
        self._metadata: tuple[float, ProviderMetadata] | None = None
        self._keys: tuple[float, dict[str | None, _Key]] | None = None

    def close(self) -> None:
        self._http.close()

    # -- discovery and keys ----------------------------------------------------------------

    def metadata(self) -> ProviderMetadata:
        with self._lock:
            if self._metadata is not None and self._clock() - self._metadata[0] < METADATA_SECONDS:
                return self._metadata[1]
        document = self._get_json(self.settings.issuer + DISCOVERY_PATH, "discovery document")
        metadata = self._parse_metadata(document)
        with self._lock:
            self._metadata = (self._clock(), metadata)
        return metadata

    def find_key(self, kid: str | None, algorithm: str) -> Any:
        """The provider's public key `kid` (for `idtoken.verify_id_token`)."""
        keys = self._signing_keys(refresh=False)
        if kid not in keys and (kid is not None or len(keys) != 1):
            keys = self._signing_keys(refresh=True)
        chosen = keys.get(kid) if kid is not None else next(iter(keys.values()), None)
        if chosen is None:
            raise IdTokenRefused(
                f"the ID token is signed with a key ({kid!r}) that the provider does not "
                "publish: it was forged"
            )
        declared, key = chosen
        if declared is not None and declared != algorithm:
            raise IdTokenRefused(
                f"the ID token says {algorithm} but the provider's key {kid!r} is for {declared}"
            )
        return key.key

    def _signing_keys(self, *, refresh: bool) -> dict[str | None, _Key]:
        with self._lock:
            cached = self._keys
        now = self._clock()
        if cached is not None:
            age = now - cached[0]
            if age < (KEY_REFRESH_SECONDS if refresh else METADATA_SECONDS):
                return cached[1]
        document = self._get_json(self.metadata().jwks_uri, "keys (jwks_uri)")
        keys: dict[str | None, _Key] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK.from_dict(entry)
            except jwt.PyJWKError:
                continue  # a key of a type PAI cannot use (or an encryption key)
            declared = entry.get("alg")
            keys[entry.get("kid")] = (declared if isinstance(declared, str) else None, key)
        with self._lock:
            self._keys = (now, keys)
        return keys

    # -- the code flow ---------------------------------------------------------------------

    def authorization_url(
        self, *, redirect_uri: str, state: str, nonce: str, code_challenge: str
    ) -> str:
        query = {
            "response_type": "code",
            "client_id": self.settings.client_id,
            "redirect_uri": redirect_uri,
            "scope": " ".join(self.settings.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
        }
        endpoint = self.metadata().authorization_endpoint
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"

    def redeem(self, *, code: str, verifier: str, redirect_uri: str) -> ProviderTokens:
        """Exchange the provider's code for its tokens (the client secret goes only here)."""
        metadata = self.metadata()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        secret = self.settings.client_secret.reveal()
        headers: dict[str, str] = {}
        if metadata.client_authentication == "client_secret_post":
            form |= {"client_id": self.settings.client_id, "client_secret": secret}
        else:  # RFC 6749 §2.3.1: both form-encoded before they are joined
            pair = f"{quote(self.settings.client_id, safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            response = self._http.post(metadata.token_endpoint, data=form, headers=headers)
        except httpx.HTTPError as failure:
            raise _unreachable("token endpoint", failure) from None
        body = _json(response)
        if response.status_code != 200:
            error = body.get("error", "") if isinstance(body, dict) else ""
            raise UnauthorizedUserError(
                f"the provider refused to complete the sign-in ({error or response.status_code})"
                ": start again"
            )
        id_token = body.get("id_token") if isinstance(body, dict) else None
        if not isinstance(id_token, str):
            raise UnauthorizedUserError("the provider's token endpoint sent no ID token")
        access_token = body.get("access_token")
        return ProviderTokens(id_token, access_token if isinstance(access_token, str) else None)

    def userinfo(self, access_token: str) -> dict[str, Any]:
        """The claims of the userinfo endpoint (empty if the provider has none)."""
        endpoint = self.metadata().userinfo_endpoint
        if endpoint is None:
            return {}
        try:
            response = self._http.get(endpoint, headers={"Authorization": f"Bearer {access_token}"})
        except httpx.HTTPError as failure:
            raise _unreachable("userinfo endpoint", failure) from None
        body = _json(response)
        if response.status_code != 200 or not isinstance(body, dict):
            raise UnauthorizedUserError(
                f"the provider's userinfo endpoint answered {response.status_code}"
            )
        return body

    def logout_url(self, post_logout_redirect_uri: str) -> str | None:
        """Where the browser ends its session with the provider, or None if it cannot."""
        endpoint = self.metadata().end_session_endpoint
        if endpoint is None:
            return None
        query = {
            "client_id": self.settings.client_id,
            "post_logout_redirect_uri": post_logout_redirect_uri,
        }
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"

    # -- helpers ---------------------------------------------------------------------------

    def _get_json(self, url: str, what: str) -> Any:
        try:
            response = self._http.get(url)
        except httpx.HTTPError as failure:
            raise _unreachable(what, failure) from None
        if response.status_code != 200:
            raise ServiceUnavailableError(
                f"the OpenID Connect provider's {what} at {url} answered {response.status_code}"
            )
        return _json(response)

    def _parse_metadata(self, document: Any) -> ProviderMetadata:
        issuer = self.settings.issuer
        if not isinstance(document, dict):
            raise ServiceUnavailableError(f"{issuer}{DISCOVERY_PATH} is not a JSON object")
        if document.get("issuer") != issuer:
            raise ServiceUnavailableError(
                f"the provider's discovery document names the issuer {document.get('issuer')!r}"
                f", not PAI_OIDC_ISSUER {issuer!r}"
            )
        missing = [name for name in REQUIRED_METADATA if not isinstance(document.get(name), str)]
        if missing:
            raise ServiceUnavailableError(
                f"the provider's discovery document has no {', '.join(missing)}"
            )
        methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return ProviderMetadata(
            authorization_endpoint=document["authorization_endpoint"],
            token_endpoint=document["token_endpoint"],
            jwks_uri=document["jwks_uri"],
            userinfo_endpoint=_optional_text(document.get("userinfo_endpoint")),
            end_session_endpoint=_optional_text(document.get("end_session_endpoint")),
            signing_algorithms=tuple(
                document.get("id_token_signing_alg_values_supported") or ["RS256"]
            ),
            client_authentication=(
                "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
            ),
        )


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _unreachable(what: str, failure: httpx.HTTPError) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"the OpenID Connect provider's {what} cannot be reached ({type(failure).__name__}); "
        "try again later or ask an administrator"
    )
