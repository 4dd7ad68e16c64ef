"""Invalid jobs: each problem names the field path and the line (and column) where it is."""

from __future__ import annotations

import pytest
from job_helpers import MINIMAL_JOB, job, problem_at, problems_of

HEADER = "protocolVersion: 2\nname: test-job\ntype: job\n"
IMAGE = "prerequisites:\n  - {type: dockerimage, name: image, uri: python:3.11}\n"
# The worker role, lines 7 to 10 of BASE.
ROLE = (
    "  worker:\n"
    "    dockerImage: image\n"
    "    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}\n"
    "    commands: [echo hi]\n"
)
BASE = HEADER + IMAGE + "taskRoles:\n" + ROLE  # 10 lines


def with_role(lines: str) -> str:
    """BASE plus extra lines inside the worker role, starting at line 11."""
    return BASE + lines


def with_top(lines: str) -> str:
    """BASE plus extra top-level lines, starting at line 11."""
    return BASE + lines


CASES = [
    # top level
    ("protocol version", MINIMAL_JOB.replace(": 2", ": 3", 1), "protocolVersion", 1, "must be 2"),
    (
        "missing protocol version",
        BASE.replace("protocolVersion: 2\n", ""),
        "protocolVersion",
        1,
        "required",
    ),
    (
        "name with a space",
        BASE.replace("test-job", "my job"),
        "name",
        2,
        "letters, digits, '_' and '-'",
    ),
    ("name too long", BASE.replace("test-job", "x" * 256), "name", 2, "at most 255 characters"),
    ("type", BASE.replace("type: job", "type: service"), "type", 3, "must be 'job'"),
    (
        "unknown top-level key",
        with_top("taskRole: {}\n"),
        "taskRole",
        11,
        "did you mean 'taskRoles'",
    ),
    (
        "job retry count negative",
        with_top("jobRetryCount: -1\n"),
        "jobRetryCount",
        11,
        "≥ 0, got -1",
    ),
    (
        "job retry count quoted",
        with_top("jobRetryCount: '2'\n"),
        "jobRetryCount",
        11,
        "without quotes",
    ),
    ("parameters not a mapping", with_top("parameters: [1]\n"), "parameters", 11, "mapping"),
    ("secrets not a mapping", with_top("secrets: hunter2\n"), "secrets", 11, "a hidden value"),
    # prerequisites
    (
        "prerequisites not a list",
        BASE.replace("  - {type", "  x: {type"),
        "prerequisites",
        5,
        "must be a list",
    ),
    (
        "prerequisite type unknown",
        BASE.replace("dockerimage", "container"),
        "prerequisites[0].type",
        5,
        "must be one of 'dockerimage'",
    ),
    (
        "prerequisite without type",
        BASE.replace("type: dockerimage, ", ""),
        "prerequisites[0].type",
        5,
        "required",
    ),
    (
        "docker image without uri",
        BASE.replace(", uri: python:3.11", ""),
        "prerequisites[0].uri",
        5,
        "required",
    ),
    (
        "docker image unknown key",
        BASE.replace("uri: python:3.11", "uri: python:3.11, tag: x"),
        "prerequisites[0].tag",
        5,
        "unknown field 'tag'",
    ),
    (
        "docker auth password typed",
        BASE.replace("uri: python:3.11", "uri: python:3.11, auth: {password: 12345}"),
        "prerequisites[0].auth.password",
        5,
        "a hidden value",
    ),
    (
        "data uri not a list",
        BASE.replace("taskRoles:", "  - {type: data, name: d, uri: /data}\ntaskRoles:"),
        "prerequisites[1].uri",
        6,
        "must be a list",
    ),
    (
        "prerequisite name pattern",
        BASE.replace("name: image,", "name: my image,"),
        "prerequisites[0].name",
        5,
        "not a valid name",
    ),
    (
        "failure policy",
        BASE.replace("taskRoles:", "  - {type: script, name: s, failurePolicy: retry}\ntaskRoles:"),
        "prerequisites[1].failurePolicy",
        6,
        "'ignore' or 'fail'",
    ),
    # task roles
    ("no task roles", HEADER + IMAGE + "taskRoles: {}\n", "taskRoles", 6, "at least 1 entry"),
    ("missing task roles", HEADER + IMAGE, "taskRoles", 1, "required"),
    (
        "role name pattern",
        BASE.replace("  worker:", "  my-worker:"),
        "taskRoles.my-worker",
        7,
        "must start with a letter",
    ),
    (
        "role name without letters",
        BASE.replace("  worker:", "  __:"),
        "taskRoles.__",
        7,
        "at least one letter or digit",
    ),
    (
        "role unknown key",
        with_role("    instance: 2\n"),
        "taskRoles.worker.instance",
        11,
        "did you mean 'instances'",
    ),
    (
        "instances zero",
        with_role("    instances: 0\n"),
        "taskRoles.worker.instances",
        11,
        "must be an integer ≥ 1, got 0",
    ),
    (
        "instances text",
        with_role("    instances: two\n"),
        "taskRoles.worker.instances",
        11,
        "must be an integer ≥ 1, got 'two'",
    ),
    (
        "completion below -1",
        with_role("    completion: {minFailedInstances: -2}\n"),
        "taskRoles.worker.completion.minFailedInstances",
        11,
        "-1, a positive integer",
    ),
    (
        "completion unknown key",
        with_role("    completion: {minFailed: 1}\n"),
        "taskRoles.worker.completion.minFailed",
        11,
        "did you mean 'minFailedInstances'",
    ),
    (
        "completion not a mapping",
        with_role("    completion: 1\n"),
        "taskRoles.worker.completion",
        11,
        "mapping",
    ),
    (
        "task retry count",
        with_role("    taskRetryCount: -1\n"),
        "taskRoles.worker.taskRetryCount",
        11,
        "≥ 0",
    ),
    (
        "docker image missing",
        BASE.replace("    dockerImage: image\n", ""),
        "taskRoles.worker.dockerImage",
        7,
        "required",
    ),
    (
        "docker image unknown",
        BASE.replace("dockerImage: image", "dockerImage: imag"),
        "taskRoles.worker.dockerImage",
        8,
        "did you mean 'image'",
    ),
    (
        "script unknown",
        with_role("    script: code\n"),
        "taskRoles.worker.script",
        11,
        "no script prerequisite named 'code'",
    ),
    (
        "data of the wrong type",
        with_role("    data: image\n"),
        "taskRoles.worker.data",
        11,
        "no data prerequisite named 'image'",
    ),
    (
        "output unknown",
        with_role("    output: out\n"),
        "taskRoles.worker.output",
        11,
        "no output prerequisite",
    ),
    (
        "role prerequisite unknown",
        with_role("    prerequisites: [image, setup]\n"),
        "taskRoles.worker.prerequisites[1]",
        11,
        "no prerequisite named 'setup'",
    ),
    (
        "shm not an integer",
        with_role("    extraContainerOptions: {shmMB: big}\n"),
        "taskRoles.worker.extraContainerOptions.shmMB",
        11,
        "must be an integer ≥ 0, got 'big'",
    ),
    (
        "infiniband not a bool",
        with_role("    extraContainerOptions: {infiniband: 'yes'}\n"),
        "taskRoles.worker.extraContainerOptions.infiniband",
        11,
        "true or false",
    ),
    (
        "resources missing",
        BASE.replace("    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}\n", ""),
        "taskRoles.worker.resourcePerInstance",
        7,
        "required",
    ),
    (
        "gpu missing",
        BASE.replace(", gpu: 0", ""),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "required",
    ),
    (
        "cpu zero",
        BASE.replace("cpu: 1", "cpu: 0"),
        "taskRoles.worker.resourcePerInstance.cpu",
        9,
        "≥ 1, got 0",
    ),
    (
        "memory quoted",
        BASE.replace("memoryMB: 512", "memoryMB: '512'"),
        "taskRoles.worker.resourcePerInstance.memoryMB",
        9,
        "without quotes",
    ),
    (
        "gpu share finer than a thousandth",
        BASE.replace("gpu: 0", "gpu: 0.0001"),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "to a thousandth (0.001), got 0.0001",
    ),
    (
        "gpu share above one GPU",
        BASE.replace("gpu: 0", "gpu: 1.5"),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "between 0.001 and 0.999; tasks on several GPUs take whole ones, got 1.5",
    ),
    (
        "gpu whole written as a fraction",
        BASE.replace("gpu: 0", "gpu: 1.0"),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "whole GPUs are written as an integer",
    ),
    (
        "gpu negative",
        BASE.replace("gpu: 0", "gpu: -1"),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "must be 0 or more GPUs, got -1",
    ),
    (
        "gpu negative share",
        BASE.replace("gpu: 0", "gpu: -0.25"),
        "taskRoles.worker.resourcePerInstance.gpu",
        9,
        "between 0.001 and 0.999",
    ),
    (
        "gpu memory without a share",
        BASE.replace("gpu: 0", "gpu: 1, gpuMemoryMB: 4096"),
        "taskRoles.worker.resourcePerInstance",
        9,
        "gpuMemoryMB is for a task on a share of a GPU",
    ),
    (
        "gpu memory not a number",
        BASE.replace("gpu: 0", "gpu: 0.5, gpuMemoryMB: lots"),
        "taskRoles.worker.resourcePerInstance.gpuMemoryMB",
        9,
        "got 'lots'",
    ),
    (
        "resource unknown key",
        BASE.replace("gpu: 0", "gpu: 0, gpus: 1"),
        "taskRoles.worker.resourcePerInstance.gpus",
        9,
        "did you mean 'gpu'",
    ),
    (
        "port label",
        BASE.replace("gpu: 0", "gpu: 0, ports: {my-port: 1}"),
        "taskRoles.worker.resourcePerInstance.ports.my-port",
        9,
        "must start with a letter",
    ),
    (
        "no ports",
        BASE.replace("gpu: 0", "gpu: 0, ports: {}"),
        "taskRoles.worker.resourcePerInstance.ports",
        9,
        "at least 1 entry",
    ),
    (
        "port count",
        BASE.replace("gpu: 0", "gpu: 0, ports: {dist: -1}"),
        "taskRoles.worker.resourcePerInstance.ports.dist",
        9,
        "≥ 0",
    ),
    (
        "commands missing",
        BASE.replace("    commands: [echo hi]\n", ""),
        "taskRoles.worker.commands",
        7,
        "required",
    ),
    (
        "commands empty",
        BASE.replace("[echo hi]", "[]"),
        "taskRoles.worker.commands",
        10,
        "at least 1 item",
    ),
    (
        "command not text",
        BASE.replace("[echo hi]", "[echo hi, 42]"),
        "taskRoles.worker.commands[1]",
        10,
        "put it in quotes",
    ),
    (
        "commands a string",
        BASE.replace("[echo hi]", "echo hi"),
        "taskRoles.worker.commands",
        10,
        "must be a list",
    ),
    # deployments and defaults
    (
        "deployment without name",
        with_top("deployments:\n  - taskRoles: {worker: {preCommands: [x]}}\n"),
        "deployments[0].name",
        12,
        "required",
    ),
    (
        "deployment role unknown",
        with_top("deployments:\n  - name: d\n    taskRoles:\n      ps: {preCommands: [x]}\n"),
        "deployments[0].taskRoles.ps",
        14,
        "no task role named 'ps'",
    ),
    (
        "deployment names repeat",
        with_top(
            "deployments:\n"
            "  - {name: d, taskRoles: {worker: {}}}\n"
            "  - {name: d, taskRoles: {worker: {}}}\n"
        ),
        "deployments[1].name",
        13,
        "already named 'd'",
    ),
    (
        "deployment commands not a list",
        with_top("deployments:\n  - {name: d, taskRoles: {worker: {preCommands: x}}}\n"),
        "deployments[0].taskRoles.worker.preCommands",
        12,
        "must be a list",
    ),
    (
        "deployment role unknown key",
        with_top("deployments:\n  - {name: d, taskRoles: {worker: {pre: [x]}}}\n"),
        "deployments[0].taskRoles.worker.pre",
        12,
        "unknown field 'pre'",
    ),
    (
        "default deployment unknown",
        with_top("defaults:\n  deployment: warm\n"),
        "defaults.deployment",
        12,
        "no deployment named 'warm'",
    ),
    (
        "virtual cluster not text",
        with_top("defaults:\n  virtualCluster: 7\n"),
        "defaults.virtualCluster",
        12,
        "must be a string",
    ),
    # extras
    (
        "gang allocation not a bool",
        with_top("extras:\n  gangAllocation: 'no'\n"),
        "extras.gangAllocation",
        12,
        "true or false",
    ),
    (
        "priority class",
        with_top("extras:\n  hivedScheduler: {jobPriorityClass: crit}\n"),
        "extras.hivedScheduler.jobPriorityClass",
        12,
        "'prod', 'test' or 'oppo'",
    ),
    (
        "hived role unknown",
        with_top("extras:\n  hivedScheduler:\n    taskRoles:\n      ps: {skuType: V100}\n"),
        "extras.hivedScheduler.taskRoles.ps",
        14,
        "no task role named 'ps'",
    ),
    (
        "hived role unknown key",
        with_top("extras:\n  hivedScheduler:\n    taskRoles:\n      worker: {gpuType: V100}\n"),
        "extras.hivedScheduler.taskRoles.worker.gpuType",
        14,
        "unknown field 'gpuType'",
    ),
    (
        "sku count below one",
        with_top("extras:\n  hivedScheduler:\n    taskRoles:\n      worker: {skuNum: 0}\n"),
        "extras.hivedScheduler.taskRoles.worker.skuNum",
        14,
        "must be an integer ≥ 1, got 0",
    ),
    (
        "sku count as text",
        with_top("extras:\n  hivedScheduler:\n    taskRoles:\n      worker: {skuNum: '2'}\n"),
        "extras.hivedScheduler.taskRoles.worker.skuNum",
        14,
        "got '2' (write it without quotes)",
    ),
    (
        "sku and pinned cell",
        with_top(
            "extras:\n  hivedScheduler:\n    taskRoles:\n"
            "      worker: {skuType: V100, pinnedCellId: c1}\n"
        ),
        "extras.hivedScheduler.taskRoles.worker.pinnedCellId",
        14,
        "exclude each other",
    ),
    (
        "storages not a list",
        with_top("extras:\n  storages: team-nfs\n"),
        "extras.storages",
        12,
        "must be a list",
    ),
    (
        "storage without name",
        with_top("extras:\n  storages:\n    - mountPath: /mnt/x\n"),
        "extras.storages[0].name",
        13,
        "required",
    ),
    (
        "plugin without name",
        with_top("extras:\n  com.microsoft.pai.runtimeplugin:\n    - parameters: {}\n"),
        "extras.com.microsoft.pai.runtimeplugin[0].plugin",
        13,
        "required",
    ),
    (
        "plugin roles not a list",
        with_top(
            "extras:\n  com.microsoft.pai.runtimeplugin:\n    - {plugin: ssh, taskroles: worker}\n"
        ),
        "extras.com.microsoft.pai.runtimeplugin[0].taskroles",
        13,
        "must be a list",
    ),
    (
        "notification not a bool",
        with_top("extras:\n  jobStatusChangeNotification: {failed: 1}\n"),
        "extras.jobStatusChangeNotification.failed",
        12,
        "true or false",
    ),
    (
        "submit from not text",
        with_top("extras:\n  submitFrom: [cli]\n"),
        "extras.submitFrom",
        12,
        "must be a string",
    ),
    (
        "grace period longer than an hour",
        with_top("extras:\n  podGracefulDeletionTimeoutSec: 7200\n"),
        "extras.podGracefulDeletionTimeoutSec",
        12,
        "must be an integer ≥ 0 and ≤ 3600, got 7200",
    ),
    # remaining fields, one wrong type each
    ("contributor", with_top("contributor: [a]\n"), "contributor", 11, "must be a string"),
    ("description", with_top("description: {a: 1}\n"), "description", 11, "must be a string"),
    ("job version", with_top("version: [1]\n"), "version", 11, "must be a string"),
    ("deployments not a list", with_top("deployments: {}\n"), "deployments", 11, "must be a list"),
    ("defaults not a mapping", with_top("defaults: [x]\n"), "defaults", 11, "mapping"),
    ("extras not a mapping", with_top("extras: 3\n"), "extras", 11, "mapping"),
    (
        "prerequisite version",
        BASE.replace("uri: python:3.11", "uri: python:3.11, version: [1]"),
        "prerequisites[0].version",
        5,
        "must be a string",
    ),
    (
        "prerequisite protocol version",
        BASE.replace("uri: python:3.11", "uri: python:3.11, protocolVersion: 1"),
        "prerequisites[0].protocolVersion",
        5,
        "must be 2",
    ),
    (
        "docker auth not a mapping",
        BASE.replace("uri: python:3.11", "uri: python:3.11, auth: bot"),
        "prerequisites[0].auth",
        5,
        "mapping",
    ),
    (
        "docker auth user",
        BASE.replace("uri: python:3.11", "uri: python:3.11, auth: {username: 7}"),
        "prerequisites[0].auth.username",
        5,
        "must be a string",
    ),
    (
        "require not a list",
        BASE.replace("taskRoles:", "  - {type: output, name: o, require: image}\ntaskRoles:"),
        "prerequisites[1].require",
        6,
        "must be a list",
    ),
    (
        "plugin not text",
        BASE.replace("taskRoles:", "  - {type: script, name: s, plugin: 1}\ntaskRoles:"),
        "prerequisites[1].plugin",
        6,
        "must be a string",
    ),
    (
        "role protocol version",
        with_role("    protocolVersion: 3\n"),
        "taskRoles.worker.protocolVersion",
        11,
        "must be 2",
    ),
    (
        "role prerequisites not a list",
        with_role("    prerequisites: image\n"),
        "taskRoles.worker.prerequisites",
        11,
        "must be a list",
    ),
    (
        "script not text",
        with_role("    script: [code]\n"),
        "taskRoles.worker.script",
        11,
        "must be a string",
    ),
    ("data not text", with_role("    data: 1\n"), "taskRoles.worker.data", 11, "must be a string"),
    (
        "output not text",
        with_role("    output: {x: 1}\n"),
        "taskRoles.worker.output",
        11,
        "must be a string",
    ),
    (
        "extra options not a mapping",
        with_role("    extraContainerOptions: 512\n"),
        "taskRoles.worker.extraContainerOptions",
        11,
        "mapping",
    ),
    (
        "deployment protocol version",
        with_top("deployments:\n  - {name: d, protocolVersion: 1, taskRoles: {worker: {}}}\n"),
        "deployments[0].protocolVersion",
        12,
        "must be 2",
    ),
    (
        "deployment without roles",
        with_top("deployments:\n  - {name: d}\n"),
        "deployments[0].taskRoles",
        12,
        "required",
    ),
    (
        "lazy preemption not a bool",
        with_top("extras:\n  hivedScheduler: {lazyPreemptionEnable: 1}\n"),
        "extras.hivedScheduler.lazyPreemptionEnable",
        12,
        "true or false",
    ),
    (
        "affinity group not text",
        with_top(
            "extras:\n  hivedScheduler:\n    taskRoles:\n      worker: {affinityGroupName: 1}\n"
        ),
        "extras.hivedScheduler.taskRoles.worker.affinityGroupName",
        14,
        "must be a string",
    ),
    (
        "mount path not text",
        with_top("extras:\n  storages: [{name: nfs, mountPath: 1}]\n"),
        "extras.storages[0].mountPath",
        12,
        "must be a string",
    ),
    (
        "plugin parameters not a mapping",
        with_top("extras:\n  com.microsoft.pai.runtimeplugin: [{plugin: ssh, parameters: [1]}]\n"),
        "extras.com.microsoft.pai.runtimeplugin[0].parameters",
        12,
        "mapping",
    ),
    (
        "plugin failure policy",
        with_top(
            "extras:\n  com.microsoft.pai.runtimeplugin: [{plugin: ssh, failurePolicy: no}]\n"
        ),
        "extras.com.microsoft.pai.runtimeplugin[0].failurePolicy",
        12,
        "'ignore' or 'fail'",
    ),
    # YAML-level
    (
        "duplicate key",
        with_role("    commands: [echo again]\n"),
        "taskRoles.worker.commands",
        11,
        "duplicate key 'commands' (first written on line 10)",
    ),
    (
        "unsupported tag",
        with_top("parameters: {x: !!binary aGk=}\n"),
        "parameters.x",
        11,
        "tag !!binary is not supported",
    ),
    (
        "bad explicit int",
        with_top("jobRetryCount: !!int many\n"),
        "jobRetryCount",
        11,
        "the value is not a valid !!int",
    ),
    (
        "NUL in a value, written as a YAML escape",
        with_top('description: "a\\0b"\n'),
        "description",
        11,
        "the NUL character",
    ),
    (
        "NUL in a key, written as a JSON escape",
        with_top('parameters: {"x\\u0000": 1}\n'),
        "parameters",
        11,
        "the NUL character",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_problem_names_path_and_line(text: str, path: str, line: int, fragment: str) -> None:
    problem = problem_at(text, path)

    assert problem.line == line, problem
    assert fragment in problem.message, problem


def test_column_points_at_the_value() -> None:
    problem = problem_at(
        BASE.replace("cpu: 1", "cpu: 0"), "taskRoles.worker.resourcePerInstance.cpu"
    )

    assert (problem.line, problem.column) == (9, 32)


def test_unknown_key_points_at_the_key() -> None:
    problem = problem_at(with_role("    instance: 2\n"), "taskRoles.worker.instance")

    assert (problem.line, problem.column) == (11, 5)


def test_missing_field_points_at_the_key_of_the_mapping_that_lacks_it() -> None:
    problem = problem_at(BASE.replace(", gpu: 0", ""), "taskRoles.worker.resourcePerInstance.gpu")

    assert (problem.line, problem.column) == (9, 5)
    assert problem.message == "this field is required"


def test_missing_field_of_a_list_item_points_at_the_item() -> None:
    problem = problem_at(BASE.replace(", uri: python:3.11", ""), "prerequisites[0].uri")

    assert (problem.line, problem.column) == (5, 5)


def test_every_problem_is_reported_at_once() -> None:
    text = job(
        """\
        protocolVersion: 2
        name: bad job
        type: job
        prerequisites:
          - {type: dockerimage, name: image, uri: python:3.11}
          - {type: dockerimage, name: image, uri: python:3.12}
        taskRoles:
          worker:
            instances: 0
            dockerImage: missing
            resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: two}
            commands: [echo hi]
          Worker:
            dockerImage: image
            resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
            commands: [echo hi]
        defaults: {deployment: nowhere}
        """
    )

    problems = problems_of(text)

    assert [(p.path, p.line) for p in problems] == [
        ("name", 2),
        ("prerequisites[1].name", 6),
        ("taskRoles.worker.instances", 9),
        ("taskRoles.worker.dockerImage", 10),
        ("taskRoles.worker.resourcePerInstance.gpu", 11),
        ("taskRoles.Worker", 13),
        ("defaults.deployment", 17),
    ]


def test_affinity_group_roles_must_agree_on_the_sku() -> None:
    text = job(
        """\
        protocolVersion: 2
        name: test-job
        type: job
        prerequisites: [{type: dockerimage, name: image, uri: python:3.11}]
        taskRoles:
          ps: &role
            {dockerImage: image, resourcePerInstance: {cpu: 1, memoryMB: 1, gpu: 1}, commands: [x]}
          worker: *role
        extras:
          hivedScheduler:
            taskRoles:
              ps: {skuType: V100, affinityGroupName: together}
              worker: {skuType: A100, affinityGroupName: together}
        """
    )

    problem = problem_at(text, "extras.hivedScheduler.taskRoles.worker.skuType")

    assert problem.line == 13
    assert "must share one skuType, but role 'ps' asks for 'V100'" in problem.message


def test_a_key_that_is_a_list_is_refused() -> None:
    problems = problems_of(BASE + "? [1, 2]\n: x\n")

    assert [(p.message, p.line) for p in problems if p.line == 11] == [
        ("a key must be a plain value such as a name, not a list or mapping", 11)
    ]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("protocolVersion: 2\nname: [unclosed\n", 3, "invalid YAML"),
        ("a: b\n  c: d\n", 2, "mapping values are not allowed"),
        ("name: 'open\n", 2, "invalid YAML"),
        ("a: 1\n---\nb: 2\n", 2, "exactly one YAML document"),
        ("- protocolVersion: 2\n", 1, "must be a mapping"),
        ("just text\n", 1, "must be a mapping"),
        ("# nothing but a comment\n", 1, "the document is empty"),
        ("", 1, "the document is empty"),
        ("a: *nowhere\n", 1, "alias *nowhere refers to no anchor"),
        ("a: &x [1, *x]\n", 1, "refers to an anchor that contains it"),
        ("a: 1\nb: \x00\n", 2, "invalid YAML"),
    ],
)
def test_documents_that_are_not_one_yaml_mapping(text: str, line: int, fragment: str) -> None:
    problems = problems_of(text)

    assert len(problems) == 1, problems
    assert problems[0].line == line, problems[0]
    assert fragment in problems[0].message, problems[0]


def test_messages_read_as_plain_english() -> None:
    problems = problems_of(with_role("    instances: two\n    taskRetryCount: '1'\n"))

    messages = {problem.path: problem.message for problem in problems}
    assert messages == {
        "taskRoles.worker.instances": "must be an integer ≥ 1, got 'two'",
        "taskRoles.worker.taskRetryCount": (
            "must be an integer ≥ 0, got '1' (write it without quotes)"
        ),
    }
