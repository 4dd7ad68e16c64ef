"""Rendering `<% $... %>` references: scoping per role, deployments, what stays unresolved."""

from __future__ import annotations

import pytest
from job_helpers import FULL_JOB, job

from pai.protocol import parse_job, render_commands, render_text, secret_names

SCOPED_JOB = job(
    """\
    protocolVersion: 2
    name: scoped
    type: job
    parameters:
      model: resnet
      epochs: 30
      lr: 0.5
      debug: false
      empty: null
      layers: [64, 128]
      optimizer: {name: sgd, momentum: [0.9, 0.99]}
    prerequisites:
      - {type: dockerimage, name: image, uri: python:3.11}
      - {type: script, name: code, uri: github.com/example/code, version: abc123}
      - {type: script, name: other_code, uri: github.com/example/other}
      - {type: data, name: images, uri: [/data/a, /data/b]}
      - {type: output, name: out, uri: /out, bucket: models}
    taskRoles:
      trainer:
        dockerImage: image
        script: code
        data: images
        output: out
        resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
        commands:
          - "  git clone <% $script.uri %> && git checkout <% $script.version %>  "
          - train --data <% $data.uri[0] %>,<% $data.uri[ 1 ] %> --out <% $output.uri %>
          - upload <% $output.bucket %> <% $output.name %>
      evaluator:
        dockerImage: image
        script: other_code
        resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
        commands:
          - git clone <% $script.uri %>
          - evaluate --data <% $data.uri[0] %> --out <% $output.uri %>
    """
)


def test_parameters_render_in_every_role_with_their_yaml_spelling() -> None:
    spec = parse_job(FULL_JOB)

    assert render_commands(spec, "worker") == ["python worker.py --model resnet"]


@pytest.mark.parametrize(
    ("reference", "rendered"),
    [
        ("<% $parameters.model %>", "resnet"),
        ("<%$parameters.epochs%>", "30"),
        ("<% $parameters.lr %>", "0.5"),
        ("<% $parameters.debug %>", "false"),
        ("<% $parameters.layers[1] %>", "128"),
        ("<% $parameters.layers %>", "[64,128]"),
        ("<% $parameters.optimizer.name %>", "sgd"),
        ("<% $parameters.optimizer.momentum[0] %>", "0.9"),
        ("<% $parameters.optimizer %>", '{"name":"sgd","momentum":[0.9,0.99]}'),
        # unresolved references stay verbatim, as in OpenPAI
        ("<% $parameters.missing %>", "<% $parameters.missing %>"),
        ("<% $parameters.empty %>", "<% $parameters.empty %>"),
        ("<% $parameters.layers[5] %>", "<% $parameters.layers[5] %>"),
        ("<% $parameters.model.deeper %>", "<% $parameters.model.deeper %>"),
        ("<% $unknown.x %>", "<% $unknown.x %>"),
        ("<% $secrets.token %>", "<% $secrets.token %>"),
        ("<% not a reference %>", "<% not a reference %>"),
    ],
)
def test_reference_forms(reference: str, rendered: str) -> None:
    spec = parse_job(SCOPED_JOB)

    assert render_text(f"x {reference} y", spec, "trainer") == f"x {rendered} y"


def test_a_role_sees_the_prerequisites_it_selected() -> None:
    spec = parse_job(SCOPED_JOB)

    assert render_commands(spec, "trainer") == [
        "git clone github.com/example/code && git checkout abc123",
        "train --data /data/a,/data/b --out /out",
        "upload models out",
    ]


def test_a_role_does_not_see_prerequisites_other_roles_selected() -> None:
    spec = parse_job(SCOPED_JOB)

    assert render_commands(spec, "evaluator") == [
        "git clone github.com/example/other",
        "evaluate --data <% $data.uri[0] %> --out <% $output.uri %>",
    ]


def test_rendered_values_are_not_rendered_again() -> None:
    spec = parse_job(SCOPED_JOB.replace("model: resnet", "model: '<% $parameters.epochs %>'"))

    assert render_text("<% $parameters.model %>", spec, "trainer") == "<% $parameters.epochs %>"


def test_the_default_deployment_wraps_the_roles_it_covers() -> None:
    spec = parse_job(FULL_JOB)

    master = render_commands(spec, "master")
    worker = render_commands(spec, "worker")

    assert master == [
        "echo pre",
        "git clone github.com/example/train code",
        "python train.py --data /data/imagenet --out /out/checkpoints",
        "echo post",
    ]
    assert worker == ["python worker.py --model resnet"]


def test_deployments_apply_only_when_chosen_by_defaults() -> None:
    spec = parse_job(FULL_JOB.replace("  deployment: warm\n", ""))

    assert render_commands(spec, "master")[0] == "git clone github.com/example/train code"


def test_deployment_commands_render_in_the_role_scope() -> None:
    text = SCOPED_JOB + job(
        """\
        deployments:
          - name: cached
            taskRoles:
              trainer:
                preCommands:
                  - cache <% $data.uri[0] %> for <% $parameters.model %>
        defaults: {deployment: cached}
        """
    )

    assert render_commands(parse_job(text), "trainer")[0] == "cache /data/a for resnet"


def test_secret_references_survive_rendering() -> None:
    spec = parse_job(
        SCOPED_JOB.replace(
            "upload <% $output.bucket", "upload --token <% $secrets.token %> <% $output.bucket"
        )
        + "secrets: {token: hunter2}\n"
    )

    assert render_commands(spec, "trainer")[2] == "upload --token <% $secrets.token %> models out"


def test_an_unknown_role_is_a_key_error() -> None:
    spec = parse_job(SCOPED_JOB)

    with pytest.raises(KeyError, match="no task role named 'ghost'"):
        render_commands(spec, "ghost")


def test_secret_names_are_those_the_text_refers_to() -> None:
    text = "<% $secrets.user %>:<%$secrets.pass%> <% $secrets.keys[0] %> <% $parameters.user %>"
    assert secret_names(text) == {"user", "pass", "keys"}
