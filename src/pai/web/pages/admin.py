"""Administration: users (create, delete, their groups) and groups with their ACLs (the admin
flag and the virtual clusters they grant). Changes go through the identity API's handlers and
request models, so the portal checks exactly what the API checks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse

from pai.auth.directory import PROTECTED_GROUPS, Directory
from pai.server.deps import Context
from pai.server.routes import groups as groups_api
from pai.server.routes import users as users_api
from pai.server.schemas import (
    CreateGroupRequest,
    CreateUserRequest,
    GroupAcls,
    GroupExtension,
    GrouplistRequest,
    GroupPatch,
    PatchGroupRequest,
)
from pai.server.views import group_info, user_info
from pai.web.notices import redirect, redirect_after
from pai.web.routing import portal_router
from pai.web.session import Admin, FormAdmin
from pai.web.templating import render

router = portal_router()

USERS = "/admin/users"
GROUPS = "/admin/groups"

Checked = Annotated[list[str] | None, Form()]
"""The values of the form's ticked checkboxes of one name (None when none is ticked)."""


@router.get("/admin", name="portal.admin")
def admin_home(admin: Admin) -> Response:
    return redirect(USERS)


@router.get(USERS, name="portal.admin_users")
def users(request: Request, context: Context, admin: Admin) -> HTMLResponse:
    with context.database.reading() as session:
        directory = Directory(session)
        people = [user_info(user) for user in directory.users()]
        groups = [group_info(group) for group in directory.groups()]
    return render(request, "admin_users.html", nav="admin", users=people, groups=groups)


@router.get(USERS + "/{username}", name="portal.admin_user")
def user(username: str, request: Request, context: Context, admin: Admin) -> HTMLResponse:
    with context.database.reading() as session:
        directory = Directory(session)
        person = user_info(directory.user(username))
        groups = [group_info(group) for group in directory.groups()]
    return render(request, "admin_user.html", nav="admin", user=person, groups=groups)


@router.post(USERS, name="portal.create_user")
def create_user(
    context: Context,
    admin: FormAdmin,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    email: Annotated[str, Form()] = "",
    groups: Checked = None,
) -> Response:
    def create() -> str:
        body = CreateUserRequest(username=username.strip(), password=password, email=email.strip())
        with context.database.session() as session:
            directory = Directory(session)
            directory.create_user(body.username, body.password, email=body.email)
            directory.set_groups(body.username, groups or [])
        return f"User {body.username} is created."

    return redirect_after(USERS, create)


@router.post(USERS + "/{username}/delete", name="portal.delete_user")
def delete_user(username: str, context: Context, admin: FormAdmin) -> Response:
    return redirect_after(
        USERS, lambda: users_api.delete_user(username, context, admin.principal).message
    )


@router.post(USERS + "/{username}/groups", name="portal.set_user_groups")
def set_user_groups(
    username: str,
    context: Context,
    admin: FormAdmin,
    groups: Checked = None,
) -> Response:
    return redirect_after(
        f"{USERS}/{username}",
        lambda: (
            users_api.set_grouplist(
                username, GrouplistRequest(grouplist=groups or []), context, admin.principal
            ).message
        ),
    )


@router.get(GROUPS, name="portal.admin_groups")
def groups(request: Request, context: Context, admin: Admin) -> HTMLResponse:
    with context.database.reading() as session:
        directory = Directory(session)
        members: dict[str, list[str]] = {}
        for user in directory.users():
            for group in user.groups:
                members.setdefault(group.groupname, []).append(user.username)
        found = [group_info(group) for group in directory.groups()]
    return render(
        request,
        "admin_groups.html",
        nav="admin",
        groups=found,
        members=members,
        vcs=sorted(context.control_plane.cluster.virtual_clusters),
    )


@router.get(GROUPS + "/{groupname}", name="portal.admin_group")
def group(groupname: str, request: Request, context: Context, admin: Admin) -> HTMLResponse:
    with context.database.reading() as session:
        directory = Directory(session)
        found = group_info(directory.group(groupname))
        members = [member.username for member in directory.members(groupname)]
    return render(
        request,
        "admin_group.html",
        nav="admin",
        group=found,
        members=members,
        protected=groupname in PROTECTED_GROUPS,
        vcs=sorted(context.control_plane.cluster.virtual_clusters),
    )


@router.post(GROUPS, name="portal.create_group")
def create_group(
    context: Context,
    admin: FormAdmin,
    groupname: Annotated[str, Form()] = "",
    description: Annotated[str, Form()] = "",
    is_admin: Annotated[bool, Form()] = False,
    vcs: Checked = None,
) -> Response:
    return redirect_after(
        GROUPS,
        lambda: (
            groups_api.create_group(
                CreateGroupRequest(
                    groupname=groupname.strip(),
                    description=description.strip(),
                    extension=GroupExtension(
                        acls=GroupAcls(admin=is_admin, virtualClusters=vcs or [])
                    ),
                ),
                context,
                admin.principal,
            ).message
        ),
    )


@router.post(GROUPS + "/{groupname}", name="portal.update_group")
def update_group(
    groupname: str,
    context: Context,
    admin: FormAdmin,
    description: Annotated[str, Form()] = "",
    is_admin: Annotated[bool, Form()] = False,
    vcs: Checked = None,
) -> Response:
    return redirect_after(
        f"{GROUPS}/{groupname}",
        lambda: (
            groups_api.update_group(
                PatchGroupRequest(
                    patch=True,
                    data=GroupPatch(
                        groupname=groupname,
                        description=description.strip(),
                        extension=GroupExtension(
                            acls=GroupAcls(admin=is_admin, virtualClusters=vcs or [])
                        ),
                    ),
                ),
                context,
                admin.principal,
            ).message
        ),
    )


@router.post(GROUPS + "/{groupname}/delete", name="portal.delete_group")
def delete_group(groupname: str, context: Context, admin: FormAdmin) -> Response:
    return redirect_after(
        GROUPS, lambda: groups_api.delete_group(groupname, context, admin.principal).message
    )
