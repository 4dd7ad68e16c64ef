"""Alerts as Alertmanager sends them to PAI's webhook, acted on by the administrator's rules,
through the whole platform (its store, its controller) and a real SMTP server (aiosmtpd).

The messages below follow Alertmanager's webhook format (version 4); the test with the real
Prometheus and Alertmanager binaries is tests/monitoring/test_prometheus_alerting.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from monitoring.conftest import Mailbox, free_port
from pai.monitoring.access import monitoring_token
from server.harness import RunningServer, StartServer, server_settings

WAIT = 30.0
ACTIONS = """
smtp: {{host: 127.0.0.1, port: {port}, from: pai@example.com, timeoutSeconds: 5}}
adminEmails: [ops@example.com]
repeatInterval: 1h
rules:
- match: {{alertname: PaiJobIdle}}
  actions: [email-user, {{tag-jobs: {{tags: [idle]}}}}, stop-jobs]
- match: {{alertname: PaiNodeNotAlive}}
  actions: [cordon-nodes, email-admin]
"""
SLEEPER = """
protocolVersion: 2
name: {name}
type: job
prerequisites: [{{type: dockerimage, name: image, uri: "python:3.11"}}]
taskRoles:
  main:
    instances: {instances}
    dockerImage: image
    resourcePerInstance: {{cpu: {cpu}, memoryMB: 128, gpu: 0}}
    commands: ["sleep 300"]
{extras}"""


def wait_until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not within {WAIT:g} s: {what}"
        time.sleep(0.1)


def platform_with_actions(
    start: StartServer, database_url: str, tmp_path: Path, smtp_port: int
) -> RunningServer:
    home = tmp_path / f"home-{uuid.uuid4().hex[:6]}"
    home.mkdir()
    (home / "alert-actions.yaml").write_text(ACTIONS.format(port=smtp_port))
    return start(settings=server_settings(home, database_url))


def alert(name: str, status: str = "firing", **labels: str) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": name, "severity": "warn", **labels},
        "annotations": {"summary": f"{name} about {labels}"},
        "startsAt": "2026-11-25T06:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else datetime.now(UTC).isoformat(),
        "generatorURL": "http://prometheus/graph",
        "fingerprint": f"{name}-{'-'.join(labels.values())}",
    }


def notify(
    server: RunningServer, *alerts: dict[str, Any], token: str | None = None
) -> httpx.Response:
    """What Alertmanager posts to the webhook."""
    message = {
        "version": "4",
        "groupKey": "{}:{}",
        "status": alerts[0]["status"],
        "receiver": "pai",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": list(alerts),
    }
    token = token if token is not None else monitoring_token(server.settings)
    with httpx.Client(base_url=server.api_url) as client:
        return client.post(
            "/alerts/webhook", json=message, headers={"Authorization": f"Bearer {token}"}
        )


def submit(
    client: httpx.Client, name: str, *, instances: int = 1, cpu: int = 1, extras: str = ""
) -> None:
    text = SLEEPER.format(name=name, instances=instances, cpu=cpu, extras=extras)
    answer = client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})
    assert answer.status_code == 202, answer.text


def test_an_idle_job_is_tagged_stopped_and_its_owner_told_once(
    start_pai_platform: StartServer, pai_database_url: str, tmp_path: Path, mailbox: Mailbox
) -> None:
    server = platform_with_actions(start_pai_platform, pai_database_url, tmp_path, mailbox.port)
    alice = server.create_user(email="alice@example.com")
    token = server.login(alice.username, alice.password)
    with server.client(token) as client:
        submit(client, "sleeper")
        framework = f"{alice.username}~sleeper"
        wait_until(
            lambda: client.get(f"/jobs/{framework}").json()["jobStatus"]["state"] == "RUNNING",
            "runs",
        )
        idle = alert("PaiJobIdle", job_name=framework, username=alice.username, node="node1")

        assert notify(server, idle).json() == {"received": 1}
        wait_until(
            lambda: client.get(f"/jobs/{framework}").json()["jobStatus"]["state"] == "STOPPED",
            "stopped",
        )
        wait_until(lambda: mailbox.messages, "an e-mail")
        assert notify(server, idle).status_code == 200  # Alertmanager repeats a firing alert

        job = client.get(f"/jobs/{framework}").json()
        [listed] = client.get("/alerts").json()
        events = client.get(f"/jobs/{framework}/events").json()

    assert "idle" in job["tags"]
    [(recipients, message)] = mailbox.messages  # not twice
    assert recipients == ["alice@example.com"]
    body = message.get_payload()
    assert message["Subject"] == f"[PAI] PaiJobIdle: {framework}"
    assert f"about {framework}" in body and "Rule: PaiJobIdle" in body
    assert "tag-jobs on " in body and "stop-jobs on " in body and "stop requested" in body
    assert [(a["action"], a["status"]) for a in listed["actions"]] == [
        ("tag-jobs", "done"),
        ("stop-jobs", "done"),
        ("email-user", "done"),
    ]
    assert any("alert PaiJobIdle: stop-jobs" in event["message"] for event in events["data"])


def test_a_cordoned_node_takes_no_new_task_until_uncordoned(
    start_pai_platform: StartServer, pai_database_url: str, tmp_path: Path, mailbox: Mailbox
) -> None:
    server = platform_with_actions(start_pai_platform, pai_database_url, tmp_path, mailbox.port)
    admin = server.admin_token()
    notify(server, alert("PaiNodeNotAlive", node="node2", state="bad"))
    with server.client(admin) as client:
        wait_until(
            lambda: any(
                n["name"] == "node2" and n["engineState"] == "cordoned"
                for n in client.get("/cluster/nodes").json()
            ),
            "node2 cordoned",
        )
        # Opportunistic tasks may use any idle node; this gang needs all four nodes.
        oppo = "extras: {hivedScheduler: {jobPriorityClass: oppo}}\n"
        submit(client, "everywhere", instances=4, cpu=4, extras=oppo)
        wait_until(
            lambda: client.get("/jobs/admin~everywhere").json()["jobStatus"]["waitReason"],
            "the scheduler to say why the gang waits",
        )
        waiting = client.get("/jobs/admin~everywhere").json()["jobStatus"]

        assert client.delete("/cluster/nodes/node2/cordon").status_code == 200
        wait_until(
            lambda: client.get("/jobs/admin~everywhere").json()["jobStatus"]["state"] == "RUNNING",
            "the gang runs once node2 is back",
        )
        nodes = {n["name"]: n for n in client.get("/cluster/nodes").json()}

    assert waiting["state"] == "WAITING"
    reason = waiting["waitReason"]
    assert (reason["kind"], reason["details"]["nodes"]) == ("bad_nodes", ["node2"])
    assert nodes["node2"]["engineState"] == "alive"
    [(recipients, message)] = mailbox.messages
    assert recipients == ["ops@example.com"]
    assert "cordon-nodes on node2: cordoned" in message.get_payload()


def test_an_unreachable_mail_server_is_a_recorded_failure_not_a_lost_alert(
    start_pai_platform: StartServer, pai_database_url: str, tmp_path: Path
) -> None:
    port = free_port()  # nobody listens there
    server = platform_with_actions(start_pai_platform, pai_database_url, tmp_path, port)
    alice = server.create_user(email="alice@example.com")
    token = server.login(alice.username, alice.password)
    framework = f"{alice.username}~unheard"
    with server.client(token) as client:
        submit(client, "unheard")

        notify(server, alert("PaiJobIdle", job_name=framework, username=alice.username, node="n"))

        def actions() -> list[dict[str, Any]]:
            found = client.get("/alerts").json()
            return found[0]["actions"] if found else []

        wait_until(lambda: len(actions()) == 3, "three actions recorded")
        mailed = {a["action"]: a for a in actions()}["email-user"]
        wait_until(
            lambda: client.get(f"/jobs/{framework}").json()["jobStatus"]["state"] == "STOPPED",
            "the job stopped all the same",
        )

    assert mailed["status"] == "failed"
    assert mailed["message"].startswith(f"cannot send e-mail through 127.0.0.1:{port}")


def test_the_webhook_takes_only_the_monitoring_token(start_pai_platform: StartServer) -> None:
    server = start_pai_platform()

    refused = notify(server, alert("PaiJobIdle", job_name="a~b"), token="guess")

    assert refused.status_code == 401
    assert "monitoring token" in refused.json()["message"]
