"""SSH into tasks: a job's ssh info (`GET /jobs/{user}~{job}/ssh`, as OpenPAI answers it) and the
public keys a user keeps in their profile (`/users/{username}/sshkeys`), which every
ssh-enabled job of theirs lets in."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel, Field

from pai.auth.directory import Directory
from pai.auth.permissions import Principal
from pai.auth.sealing import SecretBox
from pai.auth.secret import load_secret_key
from pai.errors import ForbiddenUserError, InvalidParametersError, NoJobError, NoUserError
from pai.orchestrator.intents import find_job
from pai.protocol import JobSpec, runtime_plugins_for_role
from pai.runtime.sshkeys import PublicKeyError, check_public_key, fingerprint, job_ssh_keys
from pai.server.deps import Caller, Context
from pai.server.errors import error_responses
from pai.server.jobviews import job_attempt
from pai.server.schemas import Message
from pai.store.sshkeys import add_ssh_key, remove_ssh_key, ssh_keys_of

router = APIRouter(tags=["ssh"])

SSH_DIR_NAME = ".pai-ssh"


class SshContainer(BaseModel):
    id: str = Field(description="The task attempt's key.")
    taskRoleName: str
    taskIndex: int
    sshIp: str
    sshPort: str
    sshCommand: str = Field(description="How to log in with a key from your profile.")


class SshKeyPair(BaseModel):
    folderPath: str = Field(description="Where in each task the job's key is, for jobssh.")
    publicKeyFileName: str | None
    privateKeyFileName: str | None
    privateKeyDirectDownloadLink: str | None = Field(
        None, description="Always null: the job's private key never leaves its tasks."
    )


class SshInfo(BaseModel):
    containers: list[SshContainer]
    keyPair: SshKeyPair
    hostPublicKey: str = Field(description="The key every task's SSH server presents.")
    keyNames: list[str] = Field(description="Titles of the profile keys the tasks let in.")


class SshKey(BaseModel):
    title: str
    value: str
    fingerprint: str
    time: int | None = None


class NewSshKey(BaseModel):
    title: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    value: str = Field(description="One public key line, e.g. the content of id_ed25519.pub.")


@router.get(
    "/jobs/{framework_name}/ssh",
    response_model=SshInfo,
    responses=error_responses(401, 403, 404),
)
def job_ssh_info(framework_name: str, context: Context, caller: Caller) -> SshInfo:
    """Where each running task of an ssh-enabled job listens, and which keys it lets in.
    Owner or admin."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        _require(caller, row.username, f"see how to log in to job '{framework_name}'")
        spec = JobSpec.model_validate(row.spec)
        jobssh = _ssh_parameters(spec, framework_name).get("jobssh") is True
        attempt = job_attempt(row)
        titles = [str(key.get("title", "")) for key in ssh_keys_of(session, row.username)]
        job_id = row.id
    containers = []
    for (role, index), task in sorted(attempt.tasks.items()):
        where = task.current.placement
        if where is None or not task.alive or "ssh" not in where["ports"]:
            continue
        port = str(where["ports"]["ssh"][0])
        containers.append(
            SshContainer(
                id=where["key"],
                taskRoleName=role,
                taskIndex=index,
                sshIp=where["address"],
                sshPort=port,
                sshCommand=f"ssh -p {port} {row.username}@{where['address']}",
            )
        )
    keys = job_ssh_keys(SecretBox(load_secret_key(context.settings)).derive, job_id)
    return SshInfo(
        containers=containers,
        keyPair=SshKeyPair(
            folderPath=f"$PAI_WORK_DIR/{SSH_DIR_NAME}",
            publicKeyFileName=None,
            privateKeyFileName="job_key" if jobssh else None,
        ),
        hostPublicKey=keys.host.public,
        keyNames=titles,
    )


@router.get(
    "/users/{username}/sshkeys", response_model=list[SshKey], responses=error_responses(401, 403)
)
def list_ssh_keys(username: str, context: Context, caller: Caller) -> list[SshKey]:
    """The public keys in a user's profile. The user or an admin."""
    _require(caller, username, f"see the SSH keys of '{username}'")
    with context.database.reading() as session:
        return [_view(key) for key in ssh_keys_of(session, username)]


@router.post(
    "/users/{username}/sshkeys",
    status_code=status.HTTP_201_CREATED,
    response_model=SshKey,
    responses=error_responses(400, 401, 403, 404),
)
def add_user_ssh_key(username: str, body: NewSshKey, context: Context, caller: Caller) -> SshKey:
    """Add a public key to a user's profile: ssh-enabled jobs started from now on let it in."""
    _require(caller, username, f"add SSH keys for '{username}'")
    try:
        value = check_public_key(body.value, "body.value")
    except PublicKeyError as exc:
        raise InvalidParametersError(str(exc)) from None
    with context.database.session() as session:
        user = Directory(session).user(username)
        if any(key.get("title") == body.title for key in ssh_keys_of(session, username)):
            raise InvalidParametersError(
                f"body.title: user '{username}' already has an SSH key titled '{body.title}'"
            )
        return _view(add_ssh_key(session, user, body.title, value))


@router.delete(
    "/users/{username}/sshkeys/{title}",
    response_model=Message,
    responses=error_responses(401, 403, 404),
)
def delete_user_ssh_key(username: str, title: str, context: Context, caller: Caller) -> Message:
    _require(caller, username, f"remove SSH keys of '{username}'")
    with context.database.session() as session:
        if not remove_ssh_key(session, Directory(session).user(username), title):
            raise NoUserError(f"user '{username}' has no SSH key titled '{title}'")
    return Message(message=f"SSH key '{title}' of user '{username}' is removed")


def _ssh_parameters(spec: JobSpec, framework_name: str) -> dict[str, Any]:
    for role in spec.task_roles:
        for plugin in runtime_plugins_for_role(spec, role):
            if plugin.plugin == "ssh":
                return dict(plugin.parameters)
    raise NoJobError(f"job '{framework_name}' does not use the ssh runtime plugin")


def _require(caller: Principal, username: str, action: str) -> None:
    if not caller.may_act_for(username):
        raise ForbiddenUserError(f"only {username} or an administrator may {action}")


def _view(key: dict[str, Any]) -> SshKey:
    value = str(key["value"])
    return SshKey(
        title=str(key.get("title", "")),
        value=value,
        fingerprint=fingerprint(value),
        time=key.get("time"),
    )
