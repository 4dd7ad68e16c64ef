"""Who may log in to the tasks of an ssh-enabled job, gathered when a task is launched: so a key
added to the owner's profile reaches every task started after it."""

from __future__ import annotations

from pai.auth.sealing import SecretBox
from pai.orchestrator.active import ActiveJob
from pai.protocol import runtime_plugins_for_role
from pai.runtime.interactive import TaskAccess
from pai.runtime.sshkeys import job_ssh_keys
from pai.store.database import Database
from pai.store.sshkeys import ssh_keys_of


def task_access(database: Database, box: SecretBox, job: ActiveJob) -> TaskAccess | None:
    """The job's keys and its owner's public keys; None for a job without the ssh plugin."""
    if not any(
        plugin.plugin == "ssh"
        for role in job.spec.task_roles
        for plugin in runtime_plugins_for_role(job.spec, role)
    ):
        return None
    with database.reading() as session:
        user_keys = tuple(key["value"] for key in ssh_keys_of(session, job.username))
    return TaskAccess(job_ssh_keys(box.derive, job.id), user_keys)
