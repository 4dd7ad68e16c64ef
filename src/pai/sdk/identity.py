"""Users, groups and tokens: the identity part of the API, and the objects it returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from pai.sdk.base import ApiBase
from pai.sdk.model import ApiModel
from pai.sdk.names import segment


class ServerInfo(ApiModel):
    """`GET /info`: what the server is."""

    name: str
    version: str
    launcher_type: str = ""
    authn_method: str = ""
    executor: str = ""
    """Where tasks run: local, ray."""


class LoginResult(ApiModel):
    """A successful login: the user, a user token and whether the user is an administrator."""

    user: str
    token: str = Field(repr=False)
    admin: bool = False
    has_github_pat: bool = Field(default=False, alias="hasGitHubPAT")


class TokenCheck(ApiModel):
    """The calling token as the server sees it (`GET /tokens/check`); times in seconds."""

    username: str
    application: bool = False
    admin: bool = False
    iat: int | None = None
    exp: int | None = None


class TokenInfo(ApiModel):
    """One of the caller's live tokens, known by its SHA-256 (`token_hash`); times in ms."""

    token_hash: str
    application: bool = False
    created_time: int | None = None
    expire_time: int | None = None
    last_used_time: int | None = None


class User(ApiModel):
    """A user account; `virtual_cluster` lists the VCs the user's groups grant."""

    username: str
    email: str = ""
    grouplist: list[str] = Field(default_factory=list)
    extension: dict[str, Any] = Field(default_factory=dict)
    admin: bool = False
    virtual_cluster: list[str] = Field(default_factory=list)
    storage_config: list[str] = Field(default_factory=list)


class Group(ApiModel):
    """A group; its `extension.acls` grant admin rights, virtual clusters and storages."""

    groupname: str
    description: str = ""
    external_name: str = ""
    extension: dict[str, Any] = Field(default_factory=dict)

    @property
    def admin(self) -> bool:
        """Whether members are administrators."""
        return bool(self._acls().get("admin"))

    @property
    def virtual_clusters(self) -> list[str]:
        """The virtual clusters members may submit to."""
        return list(self._acls().get("virtualClusters") or [])

    @property
    def storage_configs(self) -> list[str]:
        """The storages members may use."""
        return list(self._acls().get("storageConfigs") or [])

    def _acls(self) -> dict[str, Any]:
        acls = self.extension.get("acls")
        return acls if isinstance(acls, dict) else {}


class IdentityApi(ApiBase):
    """Methods for the server, tokens, users and groups (admin-only ones say so)."""

    def info(self) -> ServerInfo:
        """What the server is (no login needed)."""
        return ServerInfo.model_validate(self._transport.get("/info"))

    def whoami(self) -> TokenCheck:
        """Who the token belongs to, and whether it is an administrator's."""
        return TokenCheck.model_validate(self._transport.get("/tokens/check"))

    def logout(self) -> None:
        """Revoke this client's token on the server."""
        self._transport.request("DELETE", "/authn/basic/logout")

    # -- tokens --------------------------------------------------------------------------

    def tokens(self) -> list[TokenInfo]:
        """The caller's live tokens (needs a user token, not an application token)."""
        body = self._transport.get("/tokens")
        return [TokenInfo.model_validate(item) for item in body["details"]]

    def create_application_token(self) -> str:
        """A new token that never expires, for scripts; revoke it with `revoke_token`.

        token = client.create_application_token()
        robot = Client(client.server, token)
        """
        return str(self._transport.send("POST", "/tokens/application")["token"])

    def revoke_token(self, token_or_hash: str) -> str:
        """Revoke one of the caller's tokens, given as the token or its `token_hash`."""
        return _message(self._transport.send("DELETE", f"/tokens/{segment(token_or_hash)}"))

    # -- users ---------------------------------------------------------------------------

    def users(self) -> list[User]:
        """Every user."""
        return [User.model_validate(item) for item in self._transport.get("/users")]

    def user(self, username: str) -> User:
        """One user; `NotFoundError` (NoUserError) if there is none."""
        return User.model_validate(self._transport.get(f"/users/{segment(username)}"))

    def create_user(
        self,
        username: str,
        password: str,
        *,
        email: str = "",
        admin: bool = False,
        virtual_clusters: Sequence[str] | None = None,
    ) -> str:
        """Create a user (admin). The user joins `default`, plus `admingroup` if `admin`, plus
        the groups granting `virtual_clusters`."""
        body: dict[str, Any] = {
            "username": username,
            "password": password,
            "email": email,
            "admin": admin,
        }
        if virtual_clusters is not None:
            body["virtualCluster"] = list(virtual_clusters)
        return _message(self._transport.send("POST", "/users", body))

    def update_user(
        self,
        username: str,
        *,
        email: str | None = None,
        password: str | None = None,
        admin: bool | None = None,
        virtual_clusters: Sequence[str] | None = None,
    ) -> str:
        """Change the given fields of a user (admin); the others stay as they are."""
        data: dict[str, Any] = {"username": username}
        for key, value in (("email", email), ("password", password), ("admin", admin)):
            if value is not None:
                data[key] = value
        if virtual_clusters is not None:
            data["virtualCluster"] = list(virtual_clusters)
        return _message(self._transport.send("PUT", "/users", {"patch": True, "data": data}))

    def set_password(self, username: str, password: str) -> str:
        """Set another user's password (admin); the user's tokens stop working."""
        return self.update_user(username, password=password)

    def change_password(self, old_password: str, new_password: str) -> str:
        """Change your own password."""
        body = {"data": {"oldPassword": old_password, "newPassword": new_password}, "patch": True}
        return _message(self._transport.send("PUT", "/users/me", body))

    def delete_user(self, username: str) -> str:
        """Delete a user (admin)."""
        return _message(self._transport.send("DELETE", f"/users/{segment(username)}"))

    def revoke_user_tokens(self, username: str) -> str:
        """Revoke every token of a user at once, user and application tokens (admin): for
        someone who has left, or whose directory group no longer grants them access."""
        return _message(self._transport.send("DELETE", f"/users/{segment(username)}/tokens"))

    def add_user_to_group(self, username: str, group: str) -> str:
        """Add a user to a group (admin)."""
        path = f"/users/{segment(username)}/group"
        return _message(self._transport.send("PUT", path, {"groupname": group}))

    def remove_user_from_group(self, username: str, group: str) -> str:
        """Remove a user from a group (admin)."""
        path = f"/users/{segment(username)}/group"
        return _message(self._transport.send("DELETE", path, {"groupname": group}))

    def set_user_groups(self, username: str, groups: Sequence[str]) -> str:
        """Replace a user's groups (admin); `default` is always kept."""
        path = f"/users/{segment(username)}/grouplist"
        return _message(self._transport.send("PUT", path, {"grouplist": list(groups)}))

    # -- groups --------------------------------------------------------------------------

    def groups(self) -> list[Group]:
        """Every group."""
        return [Group.model_validate(item) for item in self._transport.get("/groups")]

    def group(self, name: str) -> Group:
        """One group; `NotFoundError` (NoGroupError) if there is none."""
        return Group.model_validate(self._transport.get(f"/groups/{segment(name)}"))

    def group_members(self, name: str) -> list[User]:
        """The users of a group (admin)."""
        body = self._transport.get(f"/groups/{segment(name)}/userlist")
        return [User.model_validate(item) for item in body]

    def create_group(
        self,
        name: str,
        *,
        description: str = "",
        external_name: str = "",
        admin: bool = False,
        virtual_clusters: Sequence[str] = (),
        storage_configs: Sequence[str] = (),
    ) -> str:
        """Create a group (admin) whose members get `admin` rights and the `virtual_clusters`.

        client.create_group("vision", virtual_clusters=["research"])
        client.add_user_to_group("alice", "vision")
        """
        acls = {
            "admin": admin,
            "virtualClusters": list(virtual_clusters),
            "storageConfigs": list(storage_configs),
        }
        body = {
            "groupname": name,
            "description": description,
            "externalName": external_name,
            "extension": {"acls": acls},
        }
        return _message(self._transport.send("POST", "/groups", body))

    def update_group(
        self,
        name: str,
        *,
        description: str | None = None,
        admin: bool | None = None,
        virtual_clusters: Sequence[str] | None = None,
        storage_configs: Sequence[str] | None = None,
    ) -> str:
        """Change the given fields and ACL entries of a group (admin); others stay."""
        acls: dict[str, Any] = {}
        if admin is not None:
            acls["admin"] = admin
        if virtual_clusters is not None:
            acls["virtualClusters"] = list(virtual_clusters)
        if storage_configs is not None:
            acls["storageConfigs"] = list(storage_configs)
        data: dict[str, Any] = {"groupname": name}
        if description is not None:
            data["description"] = description
        if acls:
            data["extension"] = {"acls": acls}
        return _message(self._transport.send("PUT", "/groups", {"patch": True, "data": data}))

    def delete_group(self, name: str) -> str:
        """Delete a group (admin)."""
        return _message(self._transport.send("DELETE", f"/groups/{segment(name)}"))


def _message(body: Any) -> str:
    """The `message` of a `{message}` answer."""
    return str(body.get("message", "")) if isinstance(body, dict) else ""
