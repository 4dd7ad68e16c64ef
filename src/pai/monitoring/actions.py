"""What PAI does when an alert fires: the administrator's rules, read from
`$PAI_HOME/alert-actions.yaml` (or `PAI_ALERT_ACTIONS`) and checked when PAI starts.

    repeatInterval: 4h        # the same action on the same target is not repeated within it
    smtp:                     # for email-user and email-admin
      host: smtp.example.com
      port: 587
      security: starttls      # none, starttls or tls
      username: pai
      passwordFile: /etc/pai/smtp-password
      from: pai@example.com
    adminEmails: [ops@example.com]   # email-admin (default: the e-mails of admin users)
    customAlerts: [GpuTooHot]        # names of your own Prometheus rules that rules may match
    rules:
    - match: {alertname: PaiJobIdle}        # every label given must be equal
      actions: [email-user, {tag-jobs: {tags: [idle]}}, stop-jobs]
    - match: {alertname: PaiNodeNotAlive}
      actions: [cordon-nodes, email-admin]

The actions are OpenPAI's: `email-admin`, `email-user` (the job's owner), `stop-jobs`,
`tag-jobs` (with `tags`) and `cordon-nodes`; every alert is also shown in the portal. A rule
that names an unknown action, an alert no rule of Prometheus raises, or an action whose target
label (`job_name`, `node`) that alert does not carry, is refused when PAI starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pai.errors import ConfigurationError
from pai.monitoring.rules import SHIPPED_ALERTS


class Action(StrEnum):
    EMAIL_ADMIN = "email-admin"
    EMAIL_USER = "email-user"
    STOP_JOBS = "stop-jobs"
    TAG_JOBS = "tag-jobs"
    CORDON_NODES = "cordon-nodes"

    @property
    def target_label(self) -> str | None:
        """The alert label naming what the action acts on."""
        if self is Action.CORDON_NODES:
            return "node"
        return None if self is Action.EMAIL_ADMIN else "job_name"


class Security(StrEnum):
    NONE = "none"
    STARTTLS = "starttls"
    TLS = "tls"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class SmtpSettings(_Strict):
    host: str
    port: int = Field(default=25, ge=1, le=65535)
    security: Security = Security.NONE
    username: str | None = None
    password_file: Path | None = Field(default=None, alias="passwordFile")
    sender: str = Field(alias="from")
    timeout_seconds: float = Field(default=10.0, gt=0, alias="timeoutSeconds")

    def password(self) -> str | None:
        if self.password_file is None:
            return None
        return self.password_file.read_text(encoding="utf-8").strip()


class ActionStep(_Strict):
    action: Action
    tags: tuple[str, ...] = ()


class ActionRule(_Strict):
    match: dict[str, str]
    actions: tuple[ActionStep, ...] = Field(min_length=1)

    @field_validator("actions", mode="before")
    @classmethod
    def _steps(cls, raw: Any) -> Any:
        """`email-user` or `{tag-jobs: {tags: [...]}}`."""
        if not isinstance(raw, list):
            return raw
        steps: list[Any] = []
        for item in raw:
            if isinstance(item, str):
                steps.append({"action": item})
            elif isinstance(item, dict) and len(item) == 1:
                [(name, options)] = item.items()
                steps.append({"action": name, **(options or {})})
            else:
                steps.append(item)
        return steps

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match.items())


class ActionConfig(_Strict):
    repeat_interval: str = Field(default="4h", alias="repeatInterval")
    smtp: SmtpSettings | None = None
    admin_emails: tuple[str, ...] = Field(default=(), alias="adminEmails")
    custom_alerts: tuple[str, ...] = Field(default=(), alias="customAlerts")
    rules: tuple[ActionRule, ...] = ()

    @property
    def repeat(self) -> timedelta:
        return parse_duration(self.repeat_interval)

    def rules_for(self, labels: Mapping[str, str]) -> list[ActionRule]:
        return [rule for rule in self.rules if rule.matches(labels)]


_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    found = _DURATION.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m, 4h or 1d")
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def load_actions(path: Path) -> ActionConfig:
    """The administrator's rules, or none (every alert is still shown) without the file."""
    if not path.exists():
        return ActionConfig()
    where = f"{path}"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        config = ActionConfig.model_validate(raw)
    except yaml.YAMLError as error:
        raise ConfigurationError(f"{where}: not valid YAML: {error}") from None
    except ValidationError as error:
        problems = "; ".join(
            f"{_location(problem['loc'])}: {problem['msg']}" for problem in error.errors()
        )
        raise ConfigurationError(f"{where}: {problems}") from None
    _check(config, where)
    return config


def _check(config: ActionConfig, where: str) -> None:
    problems = []
    try:
        parse_duration(config.repeat_interval)
    except ValueError as error:
        problems.append(f"repeatInterval: {error}")
    known = {name: set(alert.labels) for name, alert in SHIPPED_ALERTS.items()}
    for index, rule in enumerate(config.rules):
        at = f"rules[{index}]"
        name = rule.match.get("alertname")
        if name is None:
            problems.append(f"{at}.match: must name the alert (alertname)")
            continue
        if name not in known and name not in config.custom_alerts:
            shipped = ", ".join(sorted(known))
            problems.append(
                f"{at}.match.alertname: no rule raises {name!r}, so this rule would match "
                f"nothing (PAI's alerts: {shipped}; list your own in customAlerts)"
            )
            continue
        for step_index, step in enumerate(rule.actions):
            label = step.action.target_label
            if name in known and label is not None and label not in known[name]:
                problems.append(
                    f"{at}.actions[{step_index}]: {step.action.value} acts on the alert's "
                    f"{label!r} label, which {name} does not carry"
                )
            if step.action is Action.TAG_JOBS and not step.tags:
                problems.append(f"{at}.actions[{step_index}]: tag-jobs needs tags")
            if step.action.value.startswith("email-") and config.smtp is None:
                problems.append(f"{at}.actions[{step_index}]: e-mail needs an smtp section")
    if problems:
        raise ConfigurationError(f"{where}: " + "; ".join(problems))


def _location(location: tuple[int | str, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(the file)"
