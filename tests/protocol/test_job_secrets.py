"""Secrets: substituted only at launch, masked in everything shown or stored, never in errors."""

from __future__ import annotations

import json

import pytest
import yaml
from job_helpers import FULL_JOB, MINIMAL_JOB, job, problems_of

from pai.protocol import (
    SECRET_MASK,
    masked_job_dict,
    masked_job_text,
    parse_job,
    render_commands,
    rendered_job_dict,
    substitute_secrets,
)

SECRET_VALUES = ("hunter2-registry", "hunter2-wandb")


def assert_no_secret(text: str) -> None:
    for value in SECRET_VALUES:
        assert value not in text


@pytest.mark.parametrize(
    ("text", "substituted"),
    [
        ("login <% $secrets.token %>", "login s3cr3t"),
        ("<%$secrets.token%>", "s3cr3t"),
        ("<% $secrets.nested.key %>-<% $secrets.list[1] %>", "inner-b"),
        ("port <% $secrets.port %>", "port 8080"),
        ("missing: '<% $secrets.nope %>'", "missing: ''"),
        ("<% $parameters.model %> stays", "<% $parameters.model %> stays"),
        ("<% $secrets.tricky %>", "<% $secrets.token %>"),
    ],
)
def test_substitute_secrets(text: str, substituted: str) -> None:
    secrets = {
        "token": "s3cr3t",
        "nested": {"key": "inner"},
        "list": ["a", "b"],
        "port": 8080,
        "tricky": "<% $secrets.token %>",
    }

    assert substitute_secrets(text, secrets) == substituted


def test_what_a_task_receives_at_launch_has_the_secret() -> None:
    spec = parse_job(FULL_JOB.replace("echo pre", "login <% $secrets.wandb_key %>"))

    launched = [substitute_secrets(line, spec.secrets) for line in render_commands(spec, "master")]

    assert launched[0] == "login hunter2-wandb"


def test_the_stored_form_has_commands_rendered_and_no_secret() -> None:
    spec = parse_job(FULL_JOB.replace("echo pre", "login <% $secrets.wandb_key %>"))

    stored = rendered_job_dict(spec)

    assert_no_secret(json.dumps(stored))
    assert stored["secrets"] == {"registry_password": SECRET_MASK, "wandb_key": SECRET_MASK}
    assert stored["taskRoles"]["master"]["commands"] == [
        "login <% $secrets.wandb_key %>",
        "git clone github.com/example/train code",
        "python train.py --data /data/imagenet --out /out/checkpoints",
        "echo post",
    ]
    assert "deployments" not in stored and "deployment" not in stored["defaults"]
    auth = stored["prerequisites"][0]["auth"]
    assert auth["password"] == "<% $secrets.registry_password %>"


def test_masked_dict_masks_every_secret_and_keeps_the_rest() -> None:
    spec = parse_job(FULL_JOB)

    masked = masked_job_dict(spec)

    assert_no_secret(json.dumps(masked))
    assert masked["secrets"] == {"registry_password": SECRET_MASK, "wandb_key": SECRET_MASK}
    assert masked["parameters"]["model"] == "resnet"
    assert masked["taskRoles"]["worker"]["instances"] == 3


def test_repr_of_a_spec_hides_secret_values() -> None:
    spec = parse_job(FULL_JOB)

    assert_no_secret(repr(spec))
    assert_no_secret(str(spec))


def test_masked_text_keeps_everything_else_as_written() -> None:
    masked = masked_job_text(FULL_JOB)

    assert_no_secret(masked)
    expected = FULL_JOB.replace(
        "  registry_password: hunter2-registry\n  wandb_key: hunter2-wandb\n",
        "  registry_password: '******'\n  wandb_key: '******'\n",
    )
    assert masked == expected


def test_masked_text_drops_comments_inside_the_secrets_block() -> None:
    text = MINIMAL_JOB + job(
        """\
        # the tokens below are real  (this comment stays)
        secrets:
          token: abc   # old value: hunter2-wandb
          # hunter2-registry was last year's
          key: |
            hunter2-registry
        parameters: {x: 1}  # kept
        """
    )

    masked = masked_job_text(text)

    assert_no_secret(masked)
    assert "# the tokens below are real  (this comment stays)" in masked
    assert "parameters: {x: 1}  # kept" in masked
    assert yaml.safe_load(masked)["secrets"] == {"token": SECRET_MASK, "key": SECRET_MASK}


@pytest.mark.parametrize(
    "secrets_block",
    [
        "secrets: {a: hunter2-wandb, b: [hunter2-registry]}\n",
        "secrets:\n  a:\n    nested: hunter2-wandb\n  b: hunter2-registry\n",
        "secrets:\n  a: >-\n    hunter2-wandb\n  b: 'hunter2-registry'\n",
        "secrets: &s\n  a: hunter2-wandb\n  b: hunter2-registry\n",
        "secrets: {a: &shared hunter2-wandb, b: hunter2-registry}\nparameters: {copy: *shared}\n",
        "base: &base {a: hunter2-wandb, b: hunter2-registry}\nsecrets:\n  <<: *base\n",
        "secrets: hunter2-wandb hunter2-registry\n",
    ],
)
def test_masked_text_never_shows_a_secret_whatever_the_yaml_style(secrets_block: str) -> None:
    masked = masked_job_text(MINIMAL_JOB + secrets_block)

    assert_no_secret(masked)
    assert yaml.safe_load(masked)["name"] == "test-job"


def test_masked_text_without_secrets_is_the_text() -> None:
    assert masked_job_text(MINIMAL_JOB) == MINIMAL_JOB


def test_registry_passwords_written_in_clear_are_masked() -> None:
    text = MINIMAL_JOB.replace(
        "uri: python:3.11",
        "uri: python:3.11\n    auth: {username: bot, password: hunter2-registry}",
    )

    spec = parse_job(text)

    assert_no_secret(masked_job_text(text))
    assert_no_secret(json.dumps(masked_job_dict(spec)))
    assert_no_secret(json.dumps(rendered_job_dict(spec)))
    assert "username: bot" in masked_job_text(text)


def test_error_messages_do_not_repeat_secret_values() -> None:
    text = (
        MINIMAL_JOB.replace(
            "uri: python:3.11", "uri: python:3.11\n    auth: {password: [hunter2-registry]}"
        )
        + "secrets: hunter2-wandb\n"
    )

    problems = problems_of(text)

    assert {problem.path for problem in problems} == {"prerequisites[0].auth.password", "secrets"}
    assert_no_secret(" ".join(problem.message for problem in problems))
