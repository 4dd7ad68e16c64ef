"""PAI groups that follow the organisation's directory groups, made as an administrator does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pai.authn_settings import AuthnSettings
from providers.oidc import OidcProvider
from server.harness import RunningServer, server_settings


def directory_group(server: RunningServer, name: str, external_name: str, *vcs: str) -> None:
    """A PAI group `name` for the directory group `external_name`, granting `vcs`."""
    body = {
        "groupname": name,
        "externalName": external_name,
        "extension": {"acls": {"virtualClusters": list(vcs)}},
    }
    with server.client(server.admin_token()) as client:
        response = client.post("/groups", json=body)
    assert response.status_code == 201, response.text


def user_view(server: RunningServer, username: str) -> dict[str, object]:
    """The user as administrators see it (GET /users/NAME)."""
    with server.client(server.admin_token()) as client:
        response = client.get(f"/users/{username}")
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def start_oidc_pai(
    start: Callable[..., RunningServer],
    provider: OidcProvider,
    home: Path,
    database_url: str,
    **env: str,
) -> RunningServer:
    """`start` (a server or platform factory) a PAI signing in through `provider`, registered
    there as its client; the directory groups `vision` and `speech` map to PAI groups granting
    the VCs `vision` and `speech`, and `pai-admins` makes administrators."""
    settings = server_settings(
        home,
        database_url,
        authn=AuthnSettings.from_env(
            provider.settings_env(PAI_AUTHN_ADMIN_GROUPS="pai-admins", **env)
        ),
    )
    server = start(settings)
    provider.register(server.base_url)
    directory_group(server, "vision_team", "vision", "vision")
    directory_group(server, "speech_team", "speech", "speech")
    return server
