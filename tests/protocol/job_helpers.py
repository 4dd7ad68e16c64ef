"""Job texts and assertions shared by the protocol tests."""

from __future__ import annotations

from textwrap import dedent

import pytest

from pai.protocol import Problem, ProtocolError, parse_job

# Line numbers matter: tests point at them.
#  1 protocolVersion   4 prerequisites   8 taskRoles   11 resourcePerInstance
#  2 name              5 - type          9 worker      12 commands
#  3 type              7 uri            10 dockerImage 13 - echo hi
MINIMAL_JOB = dedent(
    """\
    protocolVersion: 2
    name: test-job
    type: job
    prerequisites:
      - type: dockerimage
        name: image
        uri: python:3.11
    taskRoles:
      worker:
        dockerImage: image
        resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
        commands:
          - echo hi
    """
)

# A job that sets every field of the protocol.
FULL_JOB = dedent(
    """\
    protocolVersion: "2"
    name: full_job-01
    type: job
    version: 1.5
    contributor: protocol-tests
    description: |
      Every field of the protocol.
    parameters:
      model: resnet
      epochs: 30
      nested: {lr: [0.1, 0.01]}
    secrets:
      registry_password: hunter2-registry
      wandb_key: hunter2-wandb
    jobRetryCount: 2
    prerequisites:
      - protocolVersion: 2
        type: dockerimage
        name: train_image
        version: "1.0"
        contributor: vision
        description: training image
        uri: registry.example.com/train:1.0
        auth:
          username: bot
          password: <% $secrets.registry_password %>
          registryuri: registry.example.com
      - type: script
        name: code
        uri: github.com/example/train
        version: 9f1c2ab
      - type: data
        name: imagenet
        uri: [/data/imagenet, /data/imagenet-val]
      - type: output
        name: checkpoints
        uri: /out/checkpoints
      - type: script
        name: setup
        plugin: com.microsoft.pai.runtimeplugin.cmd
        failurePolicy: ignore
        callbacks:
          - event: taskStarts
            commands: [echo setup <% $parameters.model %>]
    taskRoles:
      master:
        protocolVersion: 2
        instances: 1
        completion: {minFailedInstances: 1, minSucceededInstances: 1}
        taskRetryCount: 1
        prerequisites: [setup]
        dockerImage: train_image
        data: imagenet
        output: checkpoints
        script: code
        extraContainerOptions: {shmMB: 8192, infiniband: true}
        resourcePerInstance:
          cpu: 8
          memoryMB: 65536
          gpu: 4
          ports: {dist: 1, tb: 2}
        commands:
          - git clone <% $script.uri %> code
          - python train.py --data <% $data.uri[0] %> --out <% $output.uri %>
      worker:
        instances: 3
        completion: {minFailedInstances: -1, minSucceededInstances: -1}
        dockerImage: train_image
        resourcePerInstance: {cpu: 4, memoryMB: 16384, gpu: 2}
        commands: [python worker.py --model <% $parameters.model %>]
    deployments:
      - name: warm
        taskRoles:
          master:
            preCommands: [echo pre]
            postCommands: [echo post]
    defaults:
      virtualCluster: vision
      deployment: warm
    extras:
      gangAllocation: false
      submitFrom: submit-job-v2
      hivedScheduler:
        jobPriorityClass: prod
        lazyPreemptionEnable: true
        gangReleaseEnable: false
        taskRoles:
          master: {skuType: V100, affinityGroupName: ddp}
          worker: {skuType: V100, skuNum: 2, affinityGroupName: ddp}
      storages:
        - name: team-nfs
          mountPath: /mnt/team
        - name: scratch
      com.microsoft.pai.runtimeplugin:
        - plugin: ssh
          parameters: {jobssh: true}
        - plugin: tensorboard
          parameters: {port: 6006, logdir: {run: <% $output.uri %>/tb}}
          taskroles: [master]
          failurePolicy: ignore
      jobStatusChangeNotification: {running: false, succeeded: true, failed: true}
      someOtherTool: {kept: true}
    """
)


def job(text: str) -> str:
    """A job text written indented inside a test."""
    return dedent(text)


def problems_of(text: str | bytes) -> tuple[Problem, ...]:
    """The problems parse_job reports; fails the test if it accepts the text."""
    with pytest.raises(ProtocolError) as caught:
        parse_job(text)
    return caught.value.problems


def problem_at(text: str | bytes, path: str) -> Problem:
    """The one problem reported for `path`."""
    problems = problems_of(text)
    found = [problem for problem in problems if problem.path == path]
    assert len(found) == 1, f"expected one problem at {path!r}, got {problems}"
    return found[0]
