"""The administrator's alert actions: checked when PAI starts, with errors that say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.errors import ConfigurationError
from pai.monitoring.actions import Action, load_actions

SMTP = "smtp: {host: 127.0.0.1, port: 2525, from: pai@example.com}\n"


def load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "alert-actions.yaml"
    path.write_text(text)
    return load_actions(path)


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigurationError) as error:
        load(tmp_path, text)
    return str(error.value)


def test_without_a_file_alerts_are_shown_and_nothing_else_happens(tmp_path: Path) -> None:
    config = load_actions(tmp_path / "absent.yaml")

    assert config.rules == () and config.rules_for({"alertname": "PaiJobIdle"}) == []


def test_a_valid_file_lists_its_steps_in_order(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        SMTP + "rules:\n- match: {alertname: PaiJobIdle}\n"
        "  actions: [email-user, {tag-jobs: {tags: [idle]}}, stop-jobs]\n",
    )

    [rule] = config.rules_for({"alertname": "PaiJobIdle", "job_name": "a~b"})  # type: ignore[attr-defined]
    assert [(step.action, step.tags) for step in rule.actions] == [
        (Action.EMAIL_USER, ()),
        (Action.TAG_JOBS, ("idle",)),
        (Action.STOP_JOBS, ()),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules:\n- match: {alertname: PaiJobIdle}\n  actions: [reboot-cluster]\n",
            "rules[0].actions[0].action: Input should be 'email-admin', 'email-user'",
        ),
        (
            "rules:\n- match: {alertname: PaiJobIdel}\n  actions: [stop-jobs]\n",
            "rules[0].match.alertname: no rule raises 'PaiJobIdel', so this rule would match "
            "nothing",
        ),
        (
            "rules:\n- match: {alertname: PaiHomeDiskNearlyFull}\n  actions: [stop-jobs]\n",
            "rules[0].actions[0]: stop-jobs acts on the alert's 'job_name' label, which "
            "PaiHomeDiskNearlyFull does not carry",
        ),
        (
            "rules:\n- match: {alertname: PaiJobIdle}\n  actions: [email-user]\n",
            "rules[0].actions[0]: e-mail needs an smtp section",
        ),
        (
            "rules:\n- match: {alertname: PaiJobIdle}\n  actions: [tag-jobs]\n",
            "rules[0].actions[0]: tag-jobs needs tags",
        ),
        ("repeatInterval: soon\n", "repeatInterval: 'soon' is not a duration"),
        ("rules: [{match: {severity: warn}, actions: [stop-jobs]}]\n", "rules[0].match: must name"),
        ("smtp: {host: x}\n", "smtp.from: Field required"),
    ],
)
def test_a_bad_file_is_refused_with_where_and_why(tmp_path: Path, text: str, message: str) -> None:
    assert message in refusal(tmp_path, text)


def test_your_own_alerts_may_be_matched_once_named(tmp_path: Path) -> None:
    text = (
        "customAlerts: [GpuTooHot]\n"
        "rules:\n- match: {alertname: GpuTooHot}\n  actions: [cordon-nodes]\n"
    )

    config = load(tmp_path, text)

    assert config.rules_for({"alertname": "GpuTooHot", "node": "n1"})  # type: ignore[attr-defined]


def test_the_shipped_example_cordons_a_node_whose_disk_is_nearly_full() -> None:
    example = Path(__file__).parents[2] / "examples" / "alert-actions.yaml"

    config = load_actions(example)

    [rule] = config.rules_for({"alertname": "PaiNodeDiskNearlyFull", "node": "gpu01"})
    assert Action.CORDON_NODES in [step.action for step in rule.actions]
