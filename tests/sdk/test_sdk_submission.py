"""What `Client.submit` sends: the job as given, or edited by parameters and a VC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pai.protocol import parse_job
from pai.sdk import InvalidArgumentError
from pai.sdk.submission import JSON_TYPE, YAML_TYPE, job_request
from sdk.jobs_api import EXAMPLES

PARAMETERS_JOB = EXAMPLES / "parameters-secrets-deployment.yaml"


def test_an_unedited_job_goes_byte_for_byte() -> None:
    text = PARAMETERS_JOB.read_text()

    request = job_request(text)

    assert request == job_request(PARAMETERS_JOB)
    assert (request.content, request.content_type) == (text.encode(), YAML_TYPE)


def test_parameters_and_vc_edit_the_job_and_keep_it_valid() -> None:
    request = job_request(PARAMETERS_JOB, parameters={"epochs": "7"}, virtual_cluster="research")

    spec = parse_job(request.content)
    original = parse_job(PARAMETERS_JOB.read_bytes())
    assert spec.parameters == {"learning_rate": 0.05, "epochs": "7"}
    assert spec.virtual_cluster == "research"
    assert spec.task_roles == original.task_roles
    assert spec.secrets == original.secrets
    assert "commands:\n    - export" in request.content.decode()  # scripts stay readable
    assert "|\n" in request.content.decode()


def test_an_undeclared_parameter_is_refused_before_sending() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        job_request(PARAMETERS_JOB, parameters={"epoch": "7"})

    assert str(caught.value) == (
        "the job declares no parameter 'epoch' (declared: epochs, learning_rate)"
    )


def test_a_dict_goes_as_json_with_its_edits() -> None:
    job = yaml.safe_load(PARAMETERS_JOB.read_text())

    request = job_request(job, virtual_cluster="research")

    assert request.content_type == JSON_TYPE
    sent = json.loads(request.content)
    assert sent["defaults"] == {"virtualCluster": "research", "deployment": "local"}
    assert job["defaults"]["virtualCluster"] == "default"  # the caller's dict is untouched


def test_text_that_is_not_a_job_goes_unedited_for_the_server_to_locate() -> None:
    request = job_request("name: [unclosed", parameters={"x": "1"})

    assert request.content == b"name: [unclosed"


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"cannot read .*absent\.yaml"):
        job_request(tmp_path / "absent.yaml")
