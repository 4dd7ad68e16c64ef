"""Runtime plugins of a role: from its prerequisites and from extras, in the runtime's order."""

from __future__ import annotations

from job_helpers import FULL_JOB, job

from pai.protocol import RuntimePlugin, parse_job, runtime_plugins_for_role

PLUGIN_JOB = job(
    """\
    protocolVersion: 2
    name: plugins
    type: job
    parameters: {greeting: hello}
    prerequisites:
      - {type: dockerimage, name: image, uri: python:3.11}
      - type: script
        name: announce
        version: "2"
        plugin: com.microsoft.pai.runtimeplugin.cmd
        callbacks:
          - {event: taskStarts, commands: ["echo <% $parameters.greeting %> <% $secrets.who %>"]}
      - type: data
        name: fetch
        plugin: com.microsoft.pai.runtimeplugin.git
        failurePolicy: ignore
        repo_uri: https://example.com/repo.git
      - {type: script, name: plain_code, uri: github.com/example/code}
    taskRoles:
      first:
        dockerImage: image
        prerequisites: [fetch, announce, plain_code]
        resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
        commands: [echo first]
      second:
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
        commands: [echo second]
    extras:
      com.microsoft.pai.runtimeplugin:
        - {plugin: ssh, parameters: {jobssh: true}}
        - {plugin: tensorboard, parameters: {port: 6006}, taskroles: [second]}
    """
)


def test_role_prerequisites_come_first_in_the_order_the_role_lists_them() -> None:
    spec = parse_job(PLUGIN_JOB)

    plugins = runtime_plugins_for_role(spec, "first")

    assert plugins == [
        RuntimePlugin(
            plugin="git",
            parameters={"repo_uri": "https://example.com/repo.git"},
            failure_policy="ignore",
        ),
        RuntimePlugin(
            plugin="cmd",
            parameters={
                "callbacks": [
                    {"event": "taskStarts", "commands": ["echo hello <% $secrets.who %>"]}
                ]
            },
            failure_policy="fail",
        ),
        RuntimePlugin(plugin="ssh", parameters={"jobssh": True}),
    ]


def test_extras_plugins_respect_taskroles() -> None:
    spec = parse_job(PLUGIN_JOB)

    assert [p.plugin for p in runtime_plugins_for_role(spec, "second")] == ["ssh", "tensorboard"]


def test_plugin_parameters_see_the_roles_own_prerequisites() -> None:
    spec = parse_job(FULL_JOB)

    master = {p.plugin: p for p in runtime_plugins_for_role(spec, "master")}

    assert master["tensorboard"].parameters == {
        "port": 6006,
        "logdir": {"run": "/out/checkpoints/tb"},
    }
    assert master["cmd"].parameters["callbacks"][0]["commands"] == ["echo setup resnet"]
    assert [p.plugin for p in runtime_plugins_for_role(spec, "worker")] == ["ssh"]
