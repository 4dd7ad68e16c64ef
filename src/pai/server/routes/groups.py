"""`/api/v2/groups`: groups and their ACLs (admin, virtual clusters, storages)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from pai.auth.directory import Directory
from pai.server.deps import Admin, Caller, Context
from pai.server.errors import error_responses
from pai.server.schemas import (
    CreateGroupRequest,
    GroupAcls,
    GroupExtension,
    GroupInfo,
    GroupMember,
    Message,
    UpdateGroupRequest,
)
from pai.server.views import group_info, user_info

router = APIRouter(prefix="/groups", tags=["groups"])

ADMIN_ERRORS = error_responses(400, 401, 403, 404)


@router.get("", response_model=list[GroupInfo], responses=error_responses(401))
def list_groups(context: Context, _caller: Caller) -> list[GroupInfo]:
    with context.database.reading() as session:
        return [group_info(group) for group in Directory(session).groups()]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=Message,
    responses=error_responses(400, 401, 403, 409),
)
def create_group(body: CreateGroupRequest, context: Context, _admin: Admin) -> Message:
    acls = _complete(_acls(body.extension))
    with context.database.session() as session:
        Directory(session).create_group(
            body.groupname,
            description=body.description,
            external_name=body.externalName,
            admin=bool(acls.admin),
            virtual_clusters=acls.virtualClusters or (),
            storage_configs=acls.storageConfigs or (),
            extension=_other_attributes(body.extension),
        )
    return Message(message=f"group '{body.groupname}' is created")


@router.put("", status_code=status.HTTP_201_CREATED, response_model=Message, responses=ADMIN_ERRORS)
def update_group(body: UpdateGroupRequest, context: Context, _admin: Admin) -> Message:
    """`patch: true` changes the given fields and ACL entries; `patch: false` replaces all."""
    data = body.data
    acls = _acls(data.extension) if body.patch else _complete(_acls(data.extension))
    with context.database.session() as session:
        Directory(session).update_group(
            data.groupname,
            description=data.description,
            external_name=data.externalName,
            admin=acls.admin if acls else None,
            virtual_clusters=acls.virtualClusters if acls else None,
            storage_configs=acls.storageConfigs if acls else None,
            extension=None if data.extension is None else _other_attributes(data.extension),
            merge_extension=body.patch,
        )
    return Message(message=f"group '{data.groupname}' is updated")


@router.get("/{group}", response_model=GroupInfo, responses=error_responses(401, 404))
def get_group(group: str, context: Context, _caller: Caller) -> GroupInfo:
    with context.database.reading() as session:
        return group_info(Directory(session).group(group))


@router.delete(
    "/{group}", status_code=status.HTTP_201_CREATED, response_model=Message, responses=ADMIN_ERRORS
)
def delete_group(group: str, context: Context, _admin: Admin) -> Message:
    with context.database.session() as session:
        Directory(session).delete_group(group)
    return Message(message=f"group '{group}' is deleted")


@router.get("/{group}/userlist", response_model=list[GroupMember], responses=ADMIN_ERRORS)
def group_userlist(group: str, context: Context, _admin: Admin) -> list[GroupMember]:
    with context.database.reading() as session:
        members = [user_info(user) for user in Directory(session).members(group)]
    return [GroupMember(**member.model_dump(), clusterAdmin=member.admin) for member in members]


def _acls(extension: GroupExtension | None) -> GroupAcls | None:
    return None if extension is None else extension.acls


def _complete(acls: GroupAcls | None) -> GroupAcls:
    """ACLs with every entry set; what a new group or a full replacement gets."""
    given = acls or GroupAcls()
    return GroupAcls(
        admin=bool(given.admin),
        virtualClusters=given.virtualClusters or [],
        storageConfigs=given.storageConfigs or [],
    )


def _other_attributes(extension: GroupExtension | None) -> dict[str, Any]:
    return dict(extension.model_extra or {}) if extension is not None else {}
