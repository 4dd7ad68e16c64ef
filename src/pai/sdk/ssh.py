"""SSH into tasks: a job's ssh info and the public keys in a user's profile."""

from __future__ import annotations

from pai.sdk.base import ApiBase
from pai.sdk.model import ApiModel
from pai.sdk.names import segment


class SshContainer(ApiModel):
    id: str
    taskRoleName: str
    taskIndex: int
    sshIp: str
    sshPort: str
    sshCommand: str


class SshInfo(ApiModel):
    """`GET /jobs/{user}~{job}/ssh`: where each running task listens, and its host key."""

    containers: list[SshContainer]
    hostPublicKey: str
    keyNames: list[str]

    def container(self, role: str | None, index: int) -> SshContainer:
        """The task `role` #`index` (role may be omitted when the job has one); LookupError."""
        roles = sorted({container.taskRoleName for container in self.containers})
        if role is None:
            if len(roles) > 1:
                raise LookupError(f"the job has several task roles ({', '.join(roles)}): name one")
            role = roles[0] if roles else ""
        for container in self.containers:
            if container.taskRoleName == role and container.taskIndex == index:
                return container
        raise LookupError(f"no running task {role} #{index} listens for SSH")


class SshKey(ApiModel):
    title: str
    value: str
    fingerprint: str
    time: int | None = None


class InteractiveJob(ApiModel):
    """A running job with the ssh or tensorboard plugin (`GET /interactive-jobs`)."""

    name: str
    username: str
    virtualCluster: str
    plugins: list[str]
    launchedTime: int | None = None
    idleSeconds: int | None = None


class SshApi(ApiBase):
    """Methods for SSH access to tasks (the job's owner or an admin)."""

    def ssh_info(self, name: str) -> SshInfo:
        framework = self._framework_name(name)
        return SshInfo.model_validate(self._transport.get(f"/jobs/{segment(framework)}/ssh"))

    def interactive_jobs(
        self, username: str | None = None, *, idle: bool = False
    ) -> list[InteractiveJob]:
        """Running ssh or tensorboard jobs (yours; everybody's for an admin), `idle` ones only
        if asked; `idleSeconds` is None while a job works."""
        params: dict[str, str] = {"idle": "true"} if idle else {}
        if username:
            params["username"] = username
        answer = self._transport.get("/interactive-jobs", params)
        return [InteractiveJob.model_validate(job) for job in answer]

    def ssh_keys(self, user: str | None = None) -> list[SshKey]:
        """The public keys in a profile (default: yours)."""
        answer = self._transport.get(self._keys_path(user))
        return [SshKey.model_validate(key) for key in answer]

    def add_ssh_key(self, title: str, value: str, user: str | None = None) -> SshKey:
        answer = self._transport.send(
            "POST", self._keys_path(user), {"title": title, "value": value}
        )
        return SshKey.model_validate(answer)

    def remove_ssh_key(self, title: str, user: str | None = None) -> None:
        self._transport.send("DELETE", f"{self._keys_path(user)}/{segment(title)}")

    def _keys_path(self, user: str | None) -> str:
        return f"/users/{segment(user or self.username or '')}/sshkeys"
