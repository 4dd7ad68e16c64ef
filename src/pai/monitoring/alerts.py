"""Alerts from Alertmanager: recorded as they arrive, then acted on by the administrator's rules.

An alert is stored before anything else happens, so none is lost; its actions run on a worker
thread, so Alertmanager gets its answer at once. Each action is recorded with its outcome, and
jobs and nodes get an event naming the alert. An action already done for the same alert and
target within the repeat interval is not done again (Alertmanager repeats firing alerts), and
stopping a job that is already stopping does nothing. E-mails go last and say what was done.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.errors import PaiError
from pai.monitoring.actions import Action, ActionConfig, ActionStep, SmtpSettings
from pai.monitoring.mail import MailError, send_mail
from pai.orchestrator.controller import FINAL_STATES
from pai.orchestrator.intents import add_tag, cordon, find_job, request_stop
from pai.store import Database
from pai.store.models import (
    Alert,
    AlertAction,
    Group,
    JobEvent,
    JobRow,
    User,
)

log = logging.getLogger(__name__)

Mailer = Callable[[SmtpSettings, Sequence[str], str, str], None]


class IncomingAlert(BaseModel):
    """One alert of Alertmanager's webhook message (version 4)."""

    model_config = ConfigDict(extra="ignore")

    status: str = Field(pattern="^(firing|resolved)$")
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: datetime
    endsAt: datetime | None = None
    fingerprint: str = ""

    def key(self) -> str:
        """Alertmanager's fingerprint, or one made from the labels as it makes it."""
        if self.fingerprint:
            return self.fingerprint
        return hashlib.sha256(json.dumps(self.labels, sort_keys=True).encode()).hexdigest()[:16]

    def ended(self) -> datetime | None:
        """When it resolved; Alertmanager sends year 1 for 'not yet'."""
        return self.endsAt if self.endsAt is not None and self.endsAt.year > 1 else None


class AlertmanagerMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str
    alerts: list[IncomingAlert]


class AlertDesk:
    """Receives alerts and acts on them; `start()` / `stop()` run the worker."""

    def __init__(
        self,
        database: Database,
        config: ActionConfig,
        wake_controller: Callable[[], None],
        *,
        portal_url: str = "",
        mailer: Mailer = send_mail,
    ) -> None:
        self._database = database
        self._config = config
        self._wake = wake_controller
        self._portal_url = portal_url
        self._mailer = mailer
        self._work: queue.Queue[int | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pai-alerts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._work.put(None)
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def receive(self, message: AlertmanagerMessage) -> None:
        """Record every alert of the message; queue the firing ones for their actions."""
        now = datetime.now(UTC)
        firing = []
        with self._database.session() as session:
            for incoming in message.alerts:
                alert = session.scalar(
                    select(Alert).where(
                        Alert.fingerprint == incoming.key(), Alert.starts_at == incoming.startsAt
                    )
                )
                if alert is None:
                    alert = Alert(
                        fingerprint=incoming.key(),
                        name=incoming.labels.get("alertname", "unnamed"),
                        starts_at=incoming.startsAt,
                        received_at=now,
                    )
                    session.add(alert)
                alert.status = incoming.status
                alert.severity = incoming.labels.get("severity", "")
                alert.labels = incoming.labels
                alert.annotations = incoming.annotations
                alert.ends_at = incoming.ended()
                alert.updated_at = now
                session.flush()
                if incoming.status == "firing":
                    firing.append(alert.id)
        for alert_id in firing:
            self._work.put(alert_id)

    def wait_idle(self) -> None:
        """Until the queued alerts have been acted on (for tests and shutdown)."""
        self._work.join()

    # -- the worker -------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            alert_id = self._work.get()
            try:
                if alert_id is None:
                    return
                self._act_on(alert_id)
            except Exception:  # one bad alert must not end the handling of the others
                log.exception("acting on alert %s failed", alert_id)
            finally:
                self._work.task_done()

    def _act_on(self, alert_id: int) -> None:
        with self._database.reading() as session:
            alert = session.get(Alert, alert_id)
            if alert is None:
                return
            labels: dict[str, str] = dict(alert.labels)
            summary = str(alert.annotations.get("summary", ""))
        steps = [step for rule in self._config.rules_for(labels) for step in rule.actions]
        done: list[str] = []
        for step in steps:
            if not step.action.value.startswith("email-"):
                done += self._do(alert_id, labels, summary, step, done)
        for step in steps:
            if step.action.value.startswith("email-"):
                self._do(alert_id, labels, summary, step, done)

    def _do(
        self,
        alert_id: int,
        labels: dict[str, str],
        summary: str,
        step: ActionStep,
        done: list[str],
    ) -> list[str]:
        """Take one action unless it was taken within the repeat interval; what was done."""
        action = step.action
        label = action.target_label
        target = labels.get(label, "") if label else "admins"
        if label is not None and not target:
            self._record(alert_id, action, "-", "failed", f"the alert has no {label!r} label")
            return []
        if self._done_lately(alert_id, action, target):
            return []
        try:
            outcome = self._perform(action, step, labels, summary, target, done)
        except (MailError, PaiError, ValueError, OSError) as error:
            self._record(alert_id, action, target, "failed", str(error))
            return []
        self._record(alert_id, action, target, "done", outcome, labels.get("alertname", ""))
        return [f"{action.value} on {target}: {outcome}"]

    def _perform(
        self,
        action: Action,
        step: ActionStep,
        labels: dict[str, str],
        summary: str,
        target: str,
        done: list[str],
    ) -> str:
        if action is Action.STOP_JOBS:
            return self._stop(target)
        if action is Action.TAG_JOBS:
            return self._tag(target, step.tags)
        if action is Action.CORDON_NODES:
            return self._cordon(target, labels.get("alertname", "an alert"), summary)
        recipients = self._owner_email(target) if action is Action.EMAIL_USER else self._admins()
        subject, body = self._mail_text(labels, summary, done)
        assert self._config.smtp is not None  # checked when the configuration was loaded
        self._mailer(self._config.smtp, recipients, subject, body)
        return f"sent to {', '.join(recipients)}"

    def _stop(self, framework_name: str) -> str:
        with self._database.session() as session:
            job = find_job(session, framework_name)
            if job.state in FINAL_STATES or job.stop_requested_at is not None:
                return f"already {job.state.lower()}; nothing to do"
            request_stop(session, job)
        self._wake()
        return "stop requested"

    def _tag(self, framework_name: str, tags: Sequence[str]) -> str:
        with self._database.session() as session:
            job = find_job(session, framework_name)
            for tag in tags:
                add_tag(job, tag)
        return f"tagged {', '.join(tags)}"

    def _cordon(self, node: str, alertname: str, summary: str) -> str:
        with self._database.session() as session:
            if not cordon(session, node, f"alert {alertname}", summary or alertname):
                return "already cordoned"
        self._wake()
        return "cordoned: no new tasks until an administrator uncordons it"

    def _owner_email(self, framework_name: str) -> list[str]:
        username = framework_name.partition("~")[0]
        with self._database.reading() as session:
            email = session.scalar(select(User.email).where(User.username == username))
        if not email:
            raise ValueError(f"user {username!r} has no e-mail address")
        return [email]

    def _admins(self) -> list[str]:
        if self._config.admin_emails:
            return list(self._config.admin_emails)
        with self._database.reading() as session:
            emails = session.scalars(
                select(User.email).join(User.groups).where(Group.is_admin, User.email != "")
            ).all()
        if not emails:
            raise ValueError("no adminEmails configured and no administrator has an e-mail")
        return sorted(set(emails))

    def _mail_text(self, labels: dict[str, str], summary: str, done: list[str]) -> tuple[str, str]:
        name = labels.get("alertname", "an alert")
        about = labels.get("job_name") or labels.get("node") or "the cluster"
        lines = [
            f"PAI's alert {name} fired about {about}.",
            "",
            summary,
            "",
            f"Rule: {name} (severity {labels.get('severity', 'none')})",
            *(f"Label {key}: {value}" for key, value in sorted(labels.items())),
            "",
            "Actions PAI took:" if done else "PAI took no other action.",
            *(f"  - {line}" for line in done),
        ]
        if self._portal_url:
            lines += ["", f"Alerts: {self._portal_url.rstrip('/')}/alerts"]
        return f"[PAI] {name}: {about}", "\n".join(lines) + "\n"

    def _done_lately(self, alert_id: int, action: Action, target: str) -> bool:
        since = datetime.now(UTC) - self._config.repeat
        with self._database.reading() as session:
            fingerprint = session.scalar(select(Alert.fingerprint).where(Alert.id == alert_id))
            earlier = session.scalar(
                select(AlertAction.id)
                .join(Alert, Alert.id == AlertAction.alert_id)
                .where(
                    Alert.fingerprint == fingerprint,
                    AlertAction.action == action.value,
                    AlertAction.target == target,
                    AlertAction.status == "done",
                    AlertAction.at >= since,
                )
                .limit(1)
            )
        return earlier is not None

    def _record(
        self,
        alert_id: int,
        action: Action,
        target: str,
        status: str,
        message: str,
        alertname: str = "",
    ) -> None:
        with self._database.session() as session:
            session.add(
                AlertAction(
                    alert_id=alert_id,
                    action=action.value,
                    target=target,
                    status=status,
                    message=message,
                )
            )
            if action.target_label == "job_name" and status == "done":
                _job_event(session, target, f"alert {alertname}: {action.value}: {message}")
        if status == "failed":
            log.warning("alert action %s on %s failed: %s", action.value, target, message)


def _job_event(session: Session, framework_name: str, message: str) -> None:
    username, _, name = framework_name.partition("~")
    job_id = session.scalar(
        select(JobRow.id).where(JobRow.username == username, JobRow.name == name)
    )
    if job_id is not None:
        session.add(JobEvent(job_id=job_id, type="Warning", reason="AlertAction", message=message))


def alert_view(alert: Alert) -> dict[str, Any]:
    """An alert as the API shows it (OpenPAI's fields, plus the actions it caused)."""
    return {
        "labels": alert.labels,
        "annotations": alert.annotations,
        "startsAt": alert.starts_at.isoformat(),
        "endsAt": alert.ends_at.isoformat() if alert.ends_at else None,
        "status": {"state": "active" if alert.status == "firing" else "resolved"},
        "fingerprint": alert.fingerprint,
        "actions": [
            {
                "action": action.action,
                "target": action.target,
                "status": action.status,
                "message": action.message,
                "at": action.at.isoformat(),
            }
            for action in alert.actions
        ],
    }
