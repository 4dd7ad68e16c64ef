"""The Prometheus and Alertmanager configuration PAI ships: what `pai monitoring config`
writes for an administrator to run Prometheus and Alertmanager with.

Prometheus scrapes PAI's `/metrics` and evaluates PAI's alert rules; Alertmanager sends every
alert (and its resolution) to PAI's webhook, where PAI records it and takes the actions the
administrator configured (`pai.monitoring.actions`). Both authenticate to PAI with the
monitoring token, kept in a file of its own next to the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

TOKEN_FILE = "pai-token"
RULES_FILE = "pai-alerts.yml"


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    duration: str
    severity: str
    labels: tuple[str, ...]
    """The labels each alert of the rule carries (what actions can use)."""
    summary: str


@dataclass(frozen=True)
class Timing:
    """Prometheus durations: how long a condition must hold, and how often things happen."""

    idle_for: str = "1h"
    hold_for: str = "5m"  # the other rules
    scrape_interval: str = "15s"
    evaluation_interval: str = "30s"
    group_wait: str = "30s"
    repeat_interval: str = "4h"


JOB_LABELS = ("username", "job_name", "virtual_cluster", "node")


def shipped_alerts(timing: Timing) -> tuple[Alert, ...]:
    job = ", ".join(JOB_LABELS)
    return (
        Alert(
            "PaiGpusIdle",
            f"max by ({job}) (task_gpu_percent) < 1",
            timing.idle_for,
            "warn",
            JOB_LABELS,
            f"job {{{{ $labels.job_name }}}} holds GPUs on {{{{ $labels.node }}}} that it has "
            f"not used for {timing.idle_for}",
        ),
        Alert(
            "PaiJobIdle",
            f"max by ({job}) (task_cpu_percent) < 1 unless on (job_name) task_gpu_percent",
            timing.idle_for,
            "warn",
            JOB_LABELS,
            f"job {{{{ $labels.job_name }}}} has used no CPU on {{{{ $labels.node }}}} for "
            f"{timing.idle_for}",
        ),
        Alert(
            "PaiNodeNotAlive",
            'pai_node_state{state=~"gone|bad"} == 1',
            timing.hold_for,
            "error",
            ("node", "state"),
            "node {{ $labels.node }} is {{ $labels.state }}",
        ),
        Alert(
            "PaiJobRetrying",
            "pai_job_retries >= 3",
            "0s",
            "warn",
            ("username", "job_name", "virtual_cluster"),
            "job {{ $labels.job_name }} has failed and been retried {{ $value }} times",
        ),
        Alert(
            "PaiTaskNearMemoryLimit",
            "task_mem_usage_percent > 90",
            timing.hold_for,
            "warn",
            (*JOB_LABELS, "role_name", "task_index"),
            "task {{ $labels.role_name }}/{{ $labels.task_index }} of job "
            "{{ $labels.job_name }} uses {{ $value | humanize }}% of its memoryMB",
        ),
        Alert(
            "PaiHomeDiskNearlyFull",
            "pai_home_disk_free_bytes / pai_home_disk_total_bytes < 0.1",
            timing.hold_for,
            "error",
            (),
            "the disk of PAI's home has less than 10% free",
        ),
        Alert(
            "PaiNodeDiskNearlyFull",
            "pai_node_disk_free_bytes / pai_node_disk_total_bytes < 0.1",
            timing.hold_for,
            "error",
            ("node",),
            "the disk of tasks' directories on {{ $labels.node }} has less than 10% free",
        ),
        Alert(
            "PaiApiDown",
            'up{job="pai"} == 0',
            "1m",
            "fatal",
            (),
            "Prometheus cannot reach PAI's API",
        ),
    )


SHIPPED_ALERTS = {alert.name: alert for alert in shipped_alerts(Timing())}


def alert_rules(timing: Timing) -> str:
    rules = [
        {
            "alert": alert.name,
            "expr": alert.expr,
            "for": alert.duration,
            "labels": {"severity": alert.severity},
            "annotations": {"summary": alert.summary},
        }
        for alert in shipped_alerts(timing)
    ]
    return _yaml({"groups": [{"name": "pai", "rules": rules}]})


def prometheus_config(
    pai_url: str, directory: Path, timing: Timing, alertmanager: str = "127.0.0.1:9093"
) -> str:
    """Scrape PAI and evaluate its rules; send alerts to Alertmanager at `alertmanager`."""
    url = urlsplit(pai_url)
    return _yaml(
        {
            "global": {
                "scrape_interval": timing.scrape_interval,
                "evaluation_interval": timing.evaluation_interval,
            },
            "rule_files": [str(directory / RULES_FILE)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
            "scrape_configs": [
                {
                    "job_name": "pai",
                    "scheme": url.scheme or "http",
                    "metrics_path": f"{url.path.rstrip('/')}/metrics",
                    "authorization": {"credentials_file": str(directory / TOKEN_FILE)},
                    "static_configs": [{"targets": [url.netloc]}],
                }
            ],
        }
    )


def alertmanager_config(pai_url: str, directory: Path, timing: Timing) -> str:
    """Every alert, firing and resolved, goes to PAI's webhook."""
    return _yaml(
        {
            "route": {
                "receiver": "pai",
                "group_by": ["alertname", "job_name", "node"],
                "group_wait": timing.group_wait,
                "group_interval": timing.group_wait,
                "repeat_interval": timing.repeat_interval,
            },
            "receivers": [
                {
                    "name": "pai",
                    "webhook_configs": [
                        {
                            "url": f"{pai_url.rstrip('/')}/api/v2/alerts/webhook",
                            "send_resolved": True,
                            "http_config": {
                                "authorization": {"credentials_file": str(directory / TOKEN_FILE)}
                            },
                        }
                    ],
                }
            ],
        }
    )


def _yaml(document: object) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=100)
