"""Valid jobs: every field is read, OpenPAI's defaults are applied, and the model API works."""

from __future__ import annotations

import pytest
from job_helpers import FULL_JOB, MINIMAL_JOB, job

from pai.protocol import (
    DataPrerequisite,
    DockerImagePrerequisite,
    JobSpec,
    ResourcePerInstance,
    ScriptPrerequisite,
    TaskRole,
    parse_job,
)


def test_minimal_job_gets_openpai_defaults() -> None:
    spec = parse_job(MINIMAL_JOB)

    role = spec.task_roles["worker"]
    assert (spec.protocol_version, spec.name, spec.type) == (2, "test-job", "job")
    assert spec.job_retry_count == 0
    assert spec.virtual_cluster == "default"
    assert spec.priority_class == "test"
    assert spec.extras.gang_allocation is True
    assert spec.extras.hived_scheduler is None
    assert spec.extras.runtime_plugins == []
    assert spec.parameters == {} and spec.secrets == {} and spec.deployments == []
    assert role.instances == 1
    assert role.task_retry_count == 0
    assert (role.completion.min_failed_instances, role.completion.min_succeeded_instances) == (1, 1)
    assert role.extra_container_options.shm_mb == 512
    assert role.extra_container_options.infiniband is False
    assert role.resource_per_instance.ports == {"ssh": 1, "http": 1}
    assert role.prerequisites == [] and role.script is None and role.data is None


def test_every_field_of_a_full_job_is_read() -> None:
    spec = parse_job(FULL_JOB)

    assert spec.protocol_version == 2
    assert spec.version == "1.5"
    assert spec.contributor == "protocol-tests"
    assert spec.description == "Every field of the protocol.\n"
    assert spec.parameters == {"model": "resnet", "epochs": 30, "nested": {"lr": [0.1, 0.01]}}
    assert spec.secrets == {"registry_password": "hunter2-registry", "wandb_key": "hunter2-wandb"}
    assert spec.job_retry_count == 2
    assert [(p.type, p.name) for p in spec.prerequisites] == [
        ("dockerimage", "train_image"),
        ("script", "code"),
        ("data", "imagenet"),
        ("output", "checkpoints"),
        ("script", "setup"),
    ]
    image = spec.prerequisite("dockerimage", "train_image")
    assert isinstance(image, DockerImagePrerequisite)
    assert (image.version, image.contributor, image.description) == (
        "1.0",
        "vision",
        "training image",
    )
    assert image.uri == "registry.example.com/train:1.0"
    assert image.auth is not None
    assert (image.auth.username, image.auth.registryuri) == ("bot", "registry.example.com")
    data = spec.prerequisite("data", "imagenet")
    assert isinstance(data, DataPrerequisite)
    assert data.uri == ["/data/imagenet", "/data/imagenet-val"]
    setup = spec.prerequisite("script", "setup")
    assert isinstance(setup, ScriptPrerequisite)
    assert setup.runtime_plugin_name == "cmd"
    assert setup.failure_policy == "ignore"
    assert setup.model_extra == {
        "callbacks": [{"event": "taskStarts", "commands": ["echo setup <% $parameters.model %>"]}]
    }

    master = spec.task_roles["master"]
    assert master.protocol_version == 2
    assert master.task_retry_count == 1
    assert master.prerequisites == ["setup"]
    assert (master.docker_image, master.data, master.output, master.script) == (
        "train_image",
        "imagenet",
        "checkpoints",
        "code",
    )
    assert master.extra_container_options.shm_mb == 8192
    assert master.extra_container_options.infiniband is True
    assert master.resource_per_instance == ResourcePerInstance(
        cpu=8, memory_mb=65536, gpu=4, ports={"dist": 1, "tb": 2, "ssh": 1, "http": 1}
    )
    worker = spec.task_roles["worker"]
    assert (worker.completion.min_failed_instances, worker.completion.min_succeeded_instances) == (
        -1,
        -1,
    )

    deployment = spec.deployments[0]
    assert deployment.name == "warm"
    assert deployment.task_roles["master"].pre_commands == ["echo pre"]
    assert deployment.task_roles["master"].post_commands == ["echo post"]
    assert spec.defaults.deployment == "warm"
    assert spec.virtual_cluster == "vision"

    extras = spec.extras
    assert extras.gang_allocation is False
    assert extras.submit_from == "submit-job-v2"
    hived = extras.hived_scheduler
    assert hived is not None
    assert spec.priority_class == "prod"
    assert hived.lazy_preemption_enable is True
    assert hived.gang_release_enable is False
    assert hived.task_roles["master"].sku_type == "V100"
    assert hived.task_roles["worker"].affinity_group_name == "ddp"
    assert hived.task_roles["worker"].pinned_cell_id is None
    assert (hived.task_roles["worker"].sku_num, hived.task_roles["master"].sku_num) == (2, None)
    assert extras.storages is not None
    assert [(s.name, s.mount_path) for s in extras.storages] == [
        ("team-nfs", "/mnt/team"),
        ("scratch", None),
    ]
    assert [p.plugin for p in extras.runtime_plugins] == ["ssh", "tensorboard"]
    assert extras.runtime_plugins[1].taskroles == ["master"]
    assert extras.runtime_plugins[1].failure_policy == "ignore"
    assert extras.runtime_plugins[0].failure_policy == "fail"
    notification = extras.job_status_change_notification
    assert notification is not None
    assert (notification.succeeded, notification.failed, notification.stopped) == (
        True,
        True,
        False,
    )
    assert extras.model_extra == {"someOtherTool": {"kept": True}}

    assert spec.total_tasks == 4
    assert spec.total_gpus == 1 * 4 + 3 * 2


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("", (1, 3)),
        ("completion: {}", (1, 3)),
        ("completion: {minFailedInstances: null, minSucceededInstances: null}", (1, 3)),
        ("completion: {minFailedInstances: 0, minSucceededInstances: 0}", (1, 3)),
        ("completion: {minFailedInstances: 2}", (2, 3)),
        ("completion: {minSucceededInstances: -1}", (1, -1)),
        ("completion: {minFailedInstances: -1, minSucceededInstances: 2}", (-1, 2)),
    ],
)
def test_completion_defaults_treat_zero_and_null_as_absent(
    completion: str, expected: tuple[int, int]
) -> None:
    text = MINIMAL_JOB.replace(
        "    dockerImage: image", f"    instances: 3\n    {completion}\n    dockerImage: image"
    )

    role = parse_job(text).task_roles["worker"]

    assert (
        role.completion.min_failed_instances,
        role.completion.min_succeeded_instances,
    ) == expected


def test_ports_the_user_sets_are_kept_and_ssh_and_http_added() -> None:
    text = MINIMAL_JOB.replace("gpu: 0}", "gpu: 0, ports: {ssh: 2, dist: 3}}")

    ports = parse_job(text).task_roles["worker"].resource_per_instance.ports

    assert ports == {"ssh": 2, "dist": 3, "http": 1}


@pytest.mark.parametrize(
    ("written", "milli", "total"), [("0.25", 250, 1), ("0.001", 1, 1), ("0.999", 999, 1)]
)
def test_a_task_may_ask_for_a_share_of_a_gpu(written: str, milli: int, total: int) -> None:
    spec = parse_job(MINIMAL_JOB.replace("gpu: 0}", f"gpu: {written}}}"))

    resources = spec.task_roles["worker"].resource_per_instance
    assert resources.gpu == float(written) and resources.gpu_milli == milli
    assert resources.gpu_memory_mb is None
    assert spec.total_gpus == total


def test_a_share_of_a_gpu_may_come_with_gpu_memory_and_adds_up_over_tasks() -> None:
    text = MINIMAL_JOB.replace("gpu: 0}", "gpu: 0.5, gpuMemoryMB: 8192}").replace(
        "dockerImage: image", "dockerImage: image\n    instances: 3"
    )

    spec = parse_job(text)

    resources = spec.task_roles["worker"].resource_per_instance
    assert (resources.gpu_milli, resources.gpu_memory_mb) == (500, 8192)
    assert spec.task_roles["worker"].total_gpus == 1.5
    assert spec.total_gpus == 2  # rounded up: the job holds part of a second GPU


def test_whole_gpus_stay_openpai_integers() -> None:
    resources = parse_job(MINIMAL_JOB.replace("gpu: 0}", "gpu: 2}")).task_roles["worker"]

    assert resources.resource_per_instance.gpu == 2
    assert resources.resource_per_instance.gpu_milli is None


def test_protocol_version_may_be_the_string_2() -> None:
    spec = parse_job(MINIMAL_JOB.replace("protocolVersion: 2", 'protocolVersion: "2"'))

    assert spec.protocol_version == 2


@pytest.mark.parametrize(("written", "read"), [("1.2", "1.2"), ("7", "7"), ("'v1'", "v1")])
def test_version_may_be_a_number_and_is_kept_as_text(written: str, read: str) -> None:
    spec = parse_job(MINIMAL_JOB + f"version: {written}\n")

    assert spec.version == read


def test_a_date_is_kept_as_written() -> None:
    spec = parse_job(MINIMAL_JOB + "version: 2024-05-01\n")

    assert spec.version == "2024-05-01"


def test_openpai_json_uses_the_protocol_spelling() -> None:
    spec = parse_job(FULL_JOB)

    dumped = spec.model_dump(by_alias=True)

    role = dumped["taskRoles"]["master"]
    assert role["resourcePerInstance"]["memoryMB"] == 65536
    assert role["extraContainerOptions"]["shmMB"] == 8192
    assert role["completion"] == {"minFailedInstances": 1, "minSucceededInstances": 1}
    assert dumped["extras"]["com.microsoft.pai.runtimeplugin"][0]["plugin"] == "ssh"
    assert dumped["extras"]["hivedScheduler"]["jobPriorityClass"] == "prod"
    assert dumped["extras"]["someOtherTool"] == {"kept": True}
    assert dumped["jobRetryCount"] == 2
    assert JobSpec.model_validate(dumped) == spec


def test_yaml_spelled_in_snake_case_is_not_the_protocol() -> None:
    text = MINIMAL_JOB.replace("taskRoles:", "task_roles:")

    with pytest.raises(ValueError, match="task_roles: unknown field"):
        parse_job(text)


def test_python_code_builds_models_with_snake_case_names() -> None:
    role = TaskRole(
        instances=4,
        docker_image="image",
        resource_per_instance=ResourcePerInstance(cpu=1, memory_mb=256, gpu=0),
        commands=["true"],
    )

    assert role.completion.min_succeeded_instances == 4
    assert role.resource_per_instance.ports == {"ssh": 1, "http": 1}


def test_prerequisite_lookup_is_per_type() -> None:
    spec = parse_job(FULL_JOB)

    assert spec.prerequisite("script", "code") is not None
    assert spec.prerequisite("data", "code") is None
    assert spec.prerequisite("script", "missing") is None


def test_the_same_name_may_be_used_by_prerequisites_of_different_types() -> None:
    text = MINIMAL_JOB.replace(
        "taskRoles:", "  - {type: script, name: image}\n  - {type: data, name: image}\ntaskRoles:"
    )

    assert len(parse_job(text).prerequisites) == 3


def test_merge_keys_and_aliases_share_settings_between_roles() -> None:
    spec = parse_job(
        job(
            """\
            protocolVersion: 2
            name: shared
            type: job
            prerequisites: [{type: dockerimage, name: image, uri: python:3.11}]
            taskRoles:
              first: &role
                dockerImage: image
                resourcePerInstance: &resources {cpu: 2, memoryMB: 1024, gpu: 0}
                commands: [echo first]
              second:
                <<: *role
                instances: 2
                commands: [echo second]
              third:
                dockerImage: image
                resourcePerInstance: *resources
                commands: [echo third]
            """
        )
    )

    assert spec.task_roles["second"].instances == 2
    assert spec.task_roles["second"].commands == ["echo second"]
    assert spec.task_roles["second"].resource_per_instance.cpu == 2
    assert spec.task_roles["third"].resource_per_instance.memory_mb == 1024


def test_spec_is_immutable() -> None:
    spec = parse_job(MINIMAL_JOB)

    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]
