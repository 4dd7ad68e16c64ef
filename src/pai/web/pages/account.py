"""The visitor's own account: their rights, their password, their tokens (application
tokens for scripts and tools are created here; a new one is shown once, never again), and the
SSH public keys their ssh-enabled jobs let in."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse

from pai.auth.directory import Directory
from pai.errors import InvalidParametersError
from pai.server.deps import Context
from pai.server.routes import ssh as ssh_api
from pai.server.routes import tokens as tokens_api
from pai.server.routes import users as users_api
from pai.server.schemas import SelfUpdate, UpdateSelfRequest
from pai.server.views import user_info
from pai.web.notices import redirect, redirect_after
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormVisitor, Visitor, end_session
from pai.web.templating import render

router = portal_router()

ACCOUNT = "/account"


@router.get(ACCOUNT, name="portal.account")
def account(request: Request, context: Context, visitor: CurrentVisitor) -> HTMLResponse:
    return _account_page(request, context, visitor)


@router.post(ACCOUNT + "/password", name="portal.change_password")
def change_password(
    context: Context,
    visitor: FormVisitor,
    old_password: Annotated[str, Form()] = "",
    new_password: Annotated[str, Form()] = "",
    repeated_password: Annotated[str, Form()] = "",
) -> Response:
    def change() -> str:
        if new_password != repeated_password:
            raise InvalidParametersError("the new password and its repetition differ")
        body = UpdateSelfRequest(
            data=SelfUpdate(oldPassword=old_password, newPassword=new_password)
        )
        users_api.update_self(body, context, visitor.principal)
        return "Your password is changed; your other sessions are logged out."

    return redirect_after(ACCOUNT, change)


@router.post(ACCOUNT + "/tokens", name="portal.create_token")
def create_token(request: Request, context: Context, visitor: FormVisitor) -> HTMLResponse:
    """A new application token, shown on this answer only (it is stored as a hash)."""
    created = tokens_api.create_application_token(context, visitor.principal)
    return _account_page(request, context, visitor, new_token=created.token)


@router.post(ACCOUNT + "/tokens/revoke", name="portal.revoke_token")
def revoke_token(
    context: Context, visitor: FormVisitor, token_hash: Annotated[str, Form()] = ""
) -> Response:
    if token_hash == visitor.principal.token.token_hash:
        tokens_api.revoke_token(token_hash, context, visitor.principal)
        response = redirect("/login", "Your session is revoked: you are logged out.")
        end_session(response)
        return response
    return redirect_after(
        ACCOUNT,
        lambda: tokens_api.revoke_token(token_hash, context, visitor.principal).message,
    )


@router.post(ACCOUNT + "/sshkeys", name="portal.add_ssh_key")
def add_ssh_key(
    context: Context,
    visitor: FormVisitor,
    title: Annotated[str, Form()] = "",
    value: Annotated[str, Form()] = "",
) -> Response:
    def add() -> str:
        body = ssh_api.NewSshKey.model_validate({"title": title, "value": value})
        key = ssh_api.add_user_ssh_key(visitor.username, body, context, visitor.principal)
        return f"SSH key '{key.title}' is added: ssh-enabled jobs started from now on let it in."

    return redirect_after(ACCOUNT, add)


@router.post(ACCOUNT + "/sshkeys/remove", name="portal.remove_ssh_key")
def remove_ssh_key(
    context: Context, visitor: FormVisitor, title: Annotated[str, Form()] = ""
) -> Response:
    return redirect_after(
        ACCOUNT,
        lambda: (
            ssh_api.delete_user_ssh_key(visitor.username, title, context, visitor.principal).message
        ),
    )


def _account_page(
    request: Request, context: Context, visitor: Visitor, *, new_token: str | None = None
) -> HTMLResponse:
    with context.database.reading() as session:
        me = user_info(Directory(session).user(visitor.username))
    tokens = tokens_api.list_tokens(context, visitor.principal).details
    return render(
        request,
        "account.html",
        nav="account",
        me=me,
        tokens=tokens,
        session_hash=visitor.principal.token.token_hash,
        new_token=new_token,
        ssh_keys=ssh_api.list_ssh_keys(visitor.username, context, visitor.principal),
    )
