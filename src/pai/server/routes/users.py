"""`/api/v2/users`: user accounts; rights come from group membership."""

from __future__ import annotations

from fastapi import APIRouter, status

from pai.auth.directory import Directory
from pai.auth.passwords import verify_password
from pai.errors import ForbiddenUserError, IncorrectPasswordError, InvalidParametersError
from pai.server.deps import Admin, Caller, Context
from pai.server.errors import error_responses
from pai.server.schemas import (
    CreateUserRequest,
    GrouplistRequest,
    GroupnameRequest,
    Message,
    UpdateSelfRequest,
    UpdateUserRequest,
    UserInfo,
)
from pai.server.views import user_info

router = APIRouter(prefix="/users", tags=["users"])

READ_ERRORS = error_responses(401, 404)
ADMIN_ERRORS = error_responses(400, 401, 403, 404)


@router.get("", response_model=list[UserInfo], responses=error_responses(401))
def list_users(context: Context, _caller: Caller) -> list[UserInfo]:
    with context.database.reading() as session:
        return [user_info(user) for user in Directory(session).users()]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=error_responses(400, 401, 403, 404, 409),
)
def create_user(body: CreateUserRequest, context: Context, _admin: Admin) -> Message:
    """Create a user in the `default` group, plus `admingroup` if `admin`, plus the groups that
    grant each VC of `virtualCluster`."""
    with context.database.session() as session:
        Directory(session).create_user(
            body.username,
            body.password,
            email=body.email,
            admin=body.admin,
            virtual_clusters=body.virtualCluster,
            extension=body.extension,
        )
    return Message(message=f"user '{body.username}' is created")


@router.put("", status_code=status.HTTP_201_CREATED, response_model=Message, responses=ADMIN_ERRORS)
def update_user(body: UpdateUserRequest, context: Context, _admin: Admin) -> Message:
    data = body.data
    with context.database.session() as session:
        Directory(session).update_user(
            data.username,
            email=data.email,
            password=data.password,
            admin=data.admin,
            virtual_clusters=data.virtualCluster,
            extension=data.extension,
            merge_extension=body.patch,
        )
    return Message(message=f"user '{data.username}' is updated")


@router.put(
    "/me",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=error_responses(400, 401, 403),
)
def update_self(body: UpdateSelfRequest, context: Context, caller: Caller) -> Message:
    """Change your own e-mail, password (both need `oldPassword`) or extension."""
    data = body.data
    if data.username is not None and data.username != caller.username:
        raise ForbiddenUserError("data.username: you can only update your own account here")
    with context.database.session() as session:
        directory = Directory(session)
        if data.newPassword is not None or data.email is not None:
            if data.oldPassword is None:
                raise InvalidParametersError(
                    "data.oldPassword: required to change the password or the e-mail"
                )
            if not verify_password(directory.user(caller.username).password_hash, data.oldPassword):
                raise IncorrectPasswordError("data.oldPassword: the password is incorrect")
        directory.update_user(
            caller.username,
            email=data.email,
            password=data.newPassword,
            extension=data.extension,
            merge_extension=body.patch,
            keep_token_hash=caller.token.token_hash,
        )
    return Message(message=f"user '{caller.username}' is updated")


@router.get("/{user}", response_model=UserInfo, responses=READ_ERRORS)
def get_user(user: str, context: Context, _caller: Caller) -> UserInfo:
    with context.database.reading() as session:
        return user_info(Directory(session).user(user))


@router.delete("/{user}", response_model=Message, responses=ADMIN_ERRORS)
def delete_user(user: str, context: Context, _admin: Admin) -> Message:
    with context.database.session() as session:
        Directory(session).delete_user(user)
    return Message(message=f"user '{user}' is deleted")


@router.delete("/{user}/tokens", response_model=Message, responses=ADMIN_ERRORS)
def revoke_user_tokens(user: str, context: Context, _admin: Admin) -> Message:
    """PAI: revoke every token of the user (user and application tokens) at once, as when
    the organisation's directory no longer vouches for them. They can log in again unless
    the directory refuses them."""
    with context.database.session() as session:
        Directory(session).revoke_tokens(user)
    return Message(message=f"the tokens of user '{user}' are revoked")


@router.put(
    "/{user}/group",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=ADMIN_ERRORS,
)
def add_to_group(user: str, body: GroupnameRequest, context: Context, _admin: Admin) -> Message:
    with context.database.session() as session:
        Directory(session).add_to_group(user, body.groupname)
    return Message(message=f"user '{user}' is added to group '{body.groupname}'")


@router.delete(
    "/{user}/group",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=ADMIN_ERRORS,
)
def remove_from_group(
    user: str, body: GroupnameRequest, context: Context, _admin: Admin
) -> Message:
    with context.database.session() as session:
        Directory(session).remove_from_group(user, body.groupname)
    return Message(message=f"user '{user}' is removed from group '{body.groupname}'")


@router.put(
    "/{user}/grouplist",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=ADMIN_ERRORS,
)
def set_grouplist(user: str, body: GrouplistRequest, context: Context, _admin: Admin) -> Message:
    """Replace the user's groups (`default` is always kept)."""
    with context.database.session() as session:
        Directory(session).set_groups(user, body.grouplist)
    return Message(message=f"the groups of user '{user}' are updated")
