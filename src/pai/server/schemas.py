"""Request and response bodies of the identity API, with OpenPAI's JSON field names."""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pai.auth.names import EMAIL_PATTERN, USERNAME_PATTERN
from pai.server.nul import NUL_REFUSED, find_nul
from pai.settings import MIN_PASSWORD_LENGTH

GROUPNAME_PATTERN = r"^[A-Za-z0-9_]+$"
VIRTUAL_CLUSTER_PATTERN = r"^[A-Za-z0-9_]+$"
MAX_PASSWORD_LENGTH = 256
"""Long enough for any passphrase, short enough that hashing cannot be abused."""

Username = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=USERNAME_PATTERN)]
Groupname = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=GROUPNAME_PATTERN)
]
Password = Annotated[
    str, StringConstraints(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)
]
Email = Annotated[str, StringConstraints(max_length=254, pattern=EMAIL_PATTERN)]
VirtualClusterName = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=VIRTUAL_CLUSTER_PATTERN)
]


class Body(BaseModel):
    """Request bodies reject unknown fields, so a typo is an error instead of a silent no-op,
    values of the wrong JSON type (`"admin": 0`) instead of coercing them, and text with NUL,
    which the store cannot keep (`pai.server.nul`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _refuse_nul(cls, data: Any) -> Any:
        where = find_nul(data)
        if where is not None:
            raise PydanticCustomError(
                "text_with_nul", f"{{where}}: {NUL_REFUSED}", {"where": where or "the body"}
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers_are_integers(cls, data: Any) -> Any:
        """JSON has one number type: `60.0` is as much an integer as `60` (JSON Schema says so,
        and clients that write every number as a float send it), while `60.5` stays refused."""
        if not isinstance(data, dict):
            return data
        return {
            key: int(value)
            if isinstance(value, float)
            and value.is_integer()
            and key in cls.model_fields
            and _takes_integer(cls.model_fields[key].annotation)
            else value
            for key, value in data.items()
        }


def _takes_integer(annotation: Any) -> bool:
    """Whether a field's type is `int` or `int | None`."""
    return annotation is int or (
        isinstance(annotation, types.UnionType) and int in annotation.__args__
    )


class Problem(BaseModel):
    """One problem of a job file: the field path, what is wrong, and where (1-based)."""

    path: str
    message: str
    line: int | None
    column: int | None


class ErrorBody(BaseModel):
    """Every error response: the OpenPAI error code and a message saying what and where."""

    code: str
    message: str
    problems: list[Problem] | None = None
    """Only for InvalidProtocolError: each problem of the job file with its location."""


class Message(BaseModel):
    message: str


class ServerInfo(BaseModel):
    name: str
    version: str
    launcherType: Literal["k8s"] = Field(
        description="Always k8s: PAI serves the API of OpenPAI on Kubernetes (the only other "
        "value, yarn, is OpenPAI's retired API); `executor` says where tasks run."
    )
    authnMethod: str
    executor: str = Field(description="PAI: where tasks run (local, ray, ...).")


class AuthnInfo(BaseModel):
    authn_type: Literal["basic", "OIDC"]
    loginURI: str
    loginURIMethod: Literal["get", "post"]
    mode: Literal["basic", "oidc", "ldap"] = Field(
        description="PAI: how people sign in; `ldap` logs in with the basic form, checked by "
        "the organisation's LDAP directory."
    )
    provider: str = Field(
        description="PAI: the OpenID Connect provider's name (for 'Sign in with ...'); empty "
        "in the other modes."
    )


class OidcTokenRequest(Body):
    """PAI: exchange the login code a sign-in through the provider ended with."""

    code: str = Field(min_length=1, max_length=256)
    codeVerifier: str = Field(
        min_length=43, max_length=128, description="The PKCE verifier of the `code_challenge`."
    )
    expiration: int | None = Field(
        default=None, ge=60, description="Lifetime of the token in seconds (default 86400)."
    )


class LoginRequest(Body):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=MAX_PASSWORD_LENGTH)
    expiration: int | None = Field(
        default=None, ge=60, description="Lifetime of the token in seconds (default 86400)."
    )


class LoginResponse(BaseModel):
    user: str
    token: str
    admin: bool
    hasGitHubPAT: bool


class ApplicationToken(BaseModel):
    token: str
    application: bool


class TokenInfo(BaseModel):
    """A live token, described without its clear text (only its SHA-256 is known)."""

    tokenHash: str = Field(
        description="SHA-256 of the token; DELETE /tokens/{tokenHash} revokes it."
    )
    application: bool
    createdTime: int = Field(description="Milliseconds since the epoch.")
    expireTime: int | None = Field(description="Milliseconds since the epoch; null: never.")
    lastUsedTime: int | None


class TokenList(BaseModel):
    """OpenPAI's list of tokens, in the closest form a server that keeps only hashes can give:
    each entry of `tokens` is what DELETE /tokens/{token} takes to revoke that token."""

    tokens: list[str] = Field(description="The SHA-256 of each live token (never the token).")
    details: list[TokenInfo] = Field(description="PAI: each token's kind and times, same order.")


class TokenCheck(BaseModel):
    """The decoded payload of the calling token."""

    username: str
    application: bool
    admin: bool
    iat: int
    exp: int | None


class UserInfo(BaseModel):
    username: str
    email: str
    grouplist: list[str]
    extension: dict[str, Any]
    admin: bool
    virtualCluster: list[str]
    storageConfig: list[str]


class GroupMember(UserInfo):
    """A user as `GET /groups/{group}/userlist` lists them."""

    clusterAdmin: bool = Field(description="OpenPAI's name of `admin`.")


class CreateUserRequest(Body):
    username: Username
    email: Email = ""
    password: Password
    admin: bool = False
    virtualCluster: list[VirtualClusterName] | None = None
    extension: dict[str, Any] | None = None


class UserPatch(Body):
    username: Username
    email: Email | None = None
    virtualCluster: list[VirtualClusterName] | None = None
    admin: bool | None = None
    password: Password | None = None
    extension: dict[str, Any] | None = None


class UserReplacement(Body):
    username: Username
    email: Email
    virtualCluster: list[VirtualClusterName]
    admin: bool
    password: Password | None = None
    extension: dict[str, Any]


class PatchUserRequest(Body):
    """`patch: true`: change only the given fields; `extension` is merged into the current one."""

    patch: Literal[True]
    data: UserPatch


class ReplaceUserRequest(Body):
    """`patch: false` (the default): every field but the password is given and replaces the
    current value."""

    patch: Literal[False] = False
    data: UserReplacement


class SelfUpdate(Body):
    username: Username | None = None
    email: Email | None = None
    newPassword: Password | None = None
    oldPassword: str | None = Field(default=None, max_length=MAX_PASSWORD_LENGTH)
    extension: dict[str, Any] | None = None


class UpdateSelfRequest(Body):
    patch: bool = Field(
        default=False,
        description="true: merge `extension` into the current one; false: replace it.",
    )
    data: SelfUpdate


class GroupnameRequest(Body):
    groupname: Groupname


class GrouplistRequest(Body):
    grouplist: list[str]


class GroupAcls(Body):
    admin: bool | None = None
    virtualClusters: list[VirtualClusterName] | None = None
    storageConfigs: list[str] | None = None


class GroupExtension(BaseModel):
    """OpenPAI's group `extension`: `acls` plus any other attributes, kept as given."""

    model_config = ConfigDict(extra="allow", strict=True)

    acls: GroupAcls | None = None


class GroupInfo(BaseModel):
    groupname: str
    description: str
    externalName: str
    extension: dict[str, Any]


class CreateGroupRequest(Body):
    groupname: Groupname
    description: str = Field(default="", max_length=1024)
    externalName: str = Field(default="", max_length=255)
    extension: GroupExtension | None = None


class GroupPatch(Body):
    groupname: Groupname
    description: str | None = Field(default=None, max_length=1024)
    externalName: str | None = Field(default=None, max_length=255)
    extension: GroupExtension | None = None


class GroupReplacement(Body):
    groupname: Groupname
    description: str = Field(max_length=1024)
    externalName: str = Field(max_length=255)
    extension: GroupExtension


class PatchGroupRequest(Body):
    """`patch: true`: change only the given fields and ACL entries; other extension attributes
    are merged into the current ones."""

    patch: Literal[True]
    data: GroupPatch


class ReplaceGroupRequest(Body):
    """`patch: false` (the default): every field is given and replaces the current value."""

    patch: Literal[False] = False
    data: GroupReplacement


PATCH_TAG = "with patch: true"
REPLACE_TAG = "with patch: false"
UNION_TAGS = frozenset({PATCH_TAG, REPLACE_TAG})
"""Names of the variants of update bodies; validation errors mention them after the field."""


def _patch_or_replace(body: Any) -> str:
    patch = body.get("patch") if isinstance(body, dict) else getattr(body, "patch", None)
    return PATCH_TAG if patch is True else REPLACE_TAG


UpdateUserRequest = Annotated[
    Annotated[PatchUserRequest, Tag(PATCH_TAG)] | Annotated[ReplaceUserRequest, Tag(REPLACE_TAG)],
    Discriminator(_patch_or_replace),
]
"""OpenPAI's `{patch, data}` update body: a partial update or a full replacement."""

UpdateGroupRequest = Annotated[
    Annotated[PatchGroupRequest, Tag(PATCH_TAG)] | Annotated[ReplaceGroupRequest, Tag(REPLACE_TAG)],
    Discriminator(_patch_or_replace),
]
