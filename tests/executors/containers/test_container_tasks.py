"""Tasks in containers of their images, through a real podman: what a task sees and is held
to, how it ends, and what is left afterwards."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pai.executors.base import KillReason, LogStream, TaskEventKind
from pai.executors.isolation.images import RegistryAuth
from pai.executors.isolation.mounts import Mount
from pai.executors.node.taskfiles import TaskFiles
from pai.executors.sandboxes.containers import ContainerSandbox

if TYPE_CHECKING:
    from conftest import Harness


def podman_names(sandbox: ContainerSandbox) -> list[str]:
    return sandbox.podman("ps", "--all", "--format", "{{.Names}}").split()


def test_a_task_runs_in_its_image_with_its_environment_and_working_directory(
    containers: Harness, container_sandbox: ContainerSandbox
) -> None:
    script = (
        'echo "pwd=$(pwd)"\n'
        'echo "var=$PAI_TASK_ROLE_LIST"\n'
        "command -v python3 || echo 'no python3'\n"
        "echo made > result.txt\n"
        "echo oops >&2\n"
        "exit 3\n"
    )
    task = containers.task("hello", script, env={"PAI_TASK_ROLE_LIST": "worker"})
    containers.executor.launch(task)
    result = containers.wait_finished("hello")

    stdout = containers.executor.logs("hello", LogStream.STDOUT).decode()
    assert f"pwd={task.working_dir}" in stdout
    assert "var=worker" in stdout
    assert "no python3" in stdout  # busybox: the image's tools, not the node's
    assert containers.executor.logs("hello", LogStream.STDERR) == b"oops\n"
    assert (task.working_dir / "result.txt").read_text() == "made\n"
    assert result.isolation == "container"
    assert result.classification.origin_exit_code == 3
    assert podman_names(container_sandbox) == []  # removed once it ended


def test_the_image_is_pulled_once_with_the_jobs_credentials_and_the_wait_is_reported(
    containers: Harness, container_sandbox: ContainerSandbox, busybox_image: str
) -> None:
    container_sandbox.remove_image(busybox_image)

    first = containers.run("first", "echo one")
    second = containers.run("second", "echo two")

    pulling = [event.message for event in containers.events["first"] if event.message]
    assert pulling[0] == f"pulling image {busybox_image}"
    assert any(" MiB" in message for message in pulling)  # the runtime's progress figures
    assert not any(event.message for event in containers.events["second"])  # present now
    assert (first.exit_code, second.exit_code) == (0, 0)


def test_a_wrong_registry_password_fails_with_254_and_is_written_nowhere(
    containers: Harness, container_sandbox: ContainerSandbox, busybox_image: str, tmp_path: Path
) -> None:
    container_sandbox.remove_image(busybox_image)
    wrong = "Wrong-Password-7f3a"

    result = containers.run("refused", "echo never", image_auth=RegistryAuth("pai", wrong))

    verdict = result.classification
    assert (result.exit_code, verdict.phrase) == (254, "ContainerImageNotExists")
    assert verdict.permanent
    assert busybox_image in verdict.diagnostics[0]
    assert "unauthorized" in verdict.diagnostics[0]
    assert result.started_at is None
    leaked = subprocess.run(["grep", "-rl", wrong, str(tmp_path)], capture_output=True, text=True)
    assert leaked.stdout == ""  # no log, record or credentials file keeps it


def test_a_private_image_on_the_node_runs_only_for_tasks_the_registry_would_let_pull_it(
    containers: Harness, container_sandbox: ContainerSandbox, busybox_image: str, tmp_path: Path
) -> None:
    container_sandbox.remove_image(busybox_image)
    wrong = "Wrong-Password-5c1e"

    pulled = containers.run("pulls", "echo pulled")  # with the right password
    refused = containers.run("wrong", "echo ran", image_auth=RegistryAuth("pai", wrong))
    anonymous = containers.run("anonymous", "echo ran", image_auth=None)
    again = containers.run("again", "echo again")

    assert pulled.exit_code == 0
    for result in (refused, anonymous):
        verdict = result.classification
        assert (result.exit_code, verdict.phrase) == (254, "ContainerImageNotExists")
        assert "unauthorized" in verdict.diagnostics[0] and busybox_image in verdict.diagnostics[0]
        assert result.started_at is None
    assert containers.executor.logs("wrong", LogStream.STDOUT) == b""
    assert again.exit_code == 0
    assert not any(event.message for event in containers.events["again"])  # not pulled again
    again_log = containers.executor.logs("again", LogStream.RUNTIME).decode()
    assert "registry" not in again_log  # its credentials were those that pulled it: not asked
    for password in (wrong, container_sandbox.password):  # the node remembers HMACs only
        leaked = subprocess.run(["grep", "-rlF", password, str(tmp_path)], capture_output=True)
        assert leaked.stdout == b""


def test_an_image_the_registry_does_not_have_fails_with_254(
    containers: Harness, container_sandbox: ContainerSandbox
) -> None:
    missing = f"{container_sandbox.registry}/pai-test/no-such-image:1"

    result = containers.run("missing", "echo never", docker_image=missing)

    assert result.exit_code == 254
    assert "manifest unknown" in result.classification.diagnostics[0]


def test_a_registry_that_cannot_be_reached_is_a_transient_failure(containers: Harness) -> None:
    unreachable = "127.0.0.1:9/pai-test/busybox:1"  # the discard port: nothing listens

    containers.launch("unreachable", "echo never", docker_image=unreachable)
    result = containers.wait_finished("unreachable", timeout=90)

    assert (result.exit_code, result.classification.phrase) == (-120, "PodCreationTransientError")
    assert "connection refused" in result.classification.diagnostics[0]


def test_memory_beyond_memory_mb_is_killed_by_the_kernel_with_openpai_oom_code(
    containers: Harness,
) -> None:
    # /dev/shm is memory the container's cgroup is charged for.
    script = "echo filling\ndd if=/dev/zero of=/dev/shm/fill bs=1M count=300\n"

    result = containers.run("hog", script, memory_mb=64, shm_mb=512)

    verdict = result.classification
    assert (result.exit_code, verdict.phrase) == (-1200, "UserContainerDockerOOMKilled")
    assert "more memory than its memoryMB of 64" in verdict.diagnostics[0]


def test_cpu_shared_memory_and_process_limits_are_the_containers(containers: Harness) -> None:
    script = (
        "df -m /dev/shm | tail -1\n"
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu.max 2>/dev/null\n"
        "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null\n"
    )

    containers.run("limits", script, cpus=2, shm_mb=96)

    lines = containers.executor.logs("limits", LogStream.STDOUT).decode()
    assert " 96 " in lines.splitlines()[0]  # a 96 MB /dev/shm
    assert "200000" in lines  # 2 CPUs: 200 ms of CPU time per 100 ms
    assert "8192" in lines  # PAI's default process limit


def test_only_the_tasks_own_directories_and_storages_are_mounted(
    containers: Harness, tmp_path: Path
) -> None:
    storage = tmp_path / "team-data"
    storage.mkdir()
    (storage / "shared.txt").write_text("team file\n")
    secret = tmp_path / "state" / "not-for-tasks.txt"
    secret.write_text("platform state\n")
    script = (
        "cat /mnt/data/shared.txt\n"
        f"cat {secret} || echo 'state: not there'\n"
        "touch /mnt/data/readonly 2>/dev/null || echo 'storage: read-only'\n"
    )
    mount = Mount(str(storage), "/mnt/data", read_only=True)

    containers.run("mounts", script, mounts=(mount,))

    stdout = containers.executor.logs("mounts", LogStream.STDOUT).decode()
    assert stdout.splitlines() == ["team file", "state: not there", "storage: read-only"]


def test_stop_sends_sigterm_to_every_process_and_kills_after_the_grace_period(
    containers: Harness,
) -> None:
    script = (
        "trap 'echo saving > saved.txt; exit 0' TERM\n"
        'setsid sh -c \'trap "echo child > child.txt; exit 0" TERM; '
        "while :; do sleep 0.1; done' &\n"
        "echo ready\n"
        "while :; do sleep 0.1; done\n"
    )
    task = containers.launch("stop-me", script)
    containers.wait_for("stop-me", TaskEventKind.STARTED)
    containers.wait_until(lambda: b"ready" in containers.executor.logs("stop-me"))

    containers.executor.kill("stop-me", KillReason.STOP_REQUESTED)
    result = containers.wait_finished("stop-me")

    assert (result.exit_code, result.classification.phrase) == (-210, "StopFrameworkRequested")
    assert (task.working_dir / "saved.txt").read_text() == "saving\n"
    assert (task.working_dir / "child.txt").read_text() == "child\n"  # left its group, still told


def test_a_task_ignoring_sigterm_is_killed_after_the_grace_period(containers: Harness) -> None:
    containers.launch("stubborn", "trap '' TERM\necho ready\nwhile :; do sleep 0.1; done\n")
    containers.wait_until(lambda: b"ready" in containers.executor.logs("stubborn"))
    asked = time.monotonic()

    containers.executor.kill("stubborn", KillReason.ATTEMPT_COMPLETED)
    result = containers.wait_finished("stubborn")

    assert result.exit_code == -220
    assert time.monotonic() - asked >= containers.config.stop_grace_seconds


def test_a_running_container_is_found_again_by_a_new_control_plane(
    containers: Harness, container_sandbox: ContainerSandbox
) -> None:
    containers.launch("survivor", "echo ready\nwhile [ ! -e stop ]; do sleep 0.1; done\necho bye")
    containers.wait_until(lambda: b"ready" in containers.executor.logs("survivor"))

    restarted = containers.new_executor()
    statuses = {status.key: status for status in restarted.recover()}
    (containers.root / "work" / "survivor" / "stop").touch()
    containers.executor = restarted
    result = containers.wait_finished("survivor")

    assert statuses["survivor"].phase.value == "running"
    assert result.exit_code == 0
    assert containers.executor.logs("survivor").endswith(b"bye\n")
    assert podman_names(container_sandbox) == []


def test_a_container_whose_supervisor_was_killed_is_removed(
    containers: Harness, container_sandbox: ContainerSandbox
) -> None:
    containers.launch("orphan", "echo ready\nwhile :; do sleep 0.1; done\n")
    containers.wait_until(lambda: b"ready" in containers.executor.logs("orphan"))
    supervisor = TaskFiles(containers.root / "state" / "tasks" / "orphan").supervisor()
    assert supervisor is not None
    os.kill(supervisor.pid, 9)

    result = containers.wait_finished("orphan")

    assert result.exit_code == -101  # the platform lost it: retried for free
    assert podman_names(container_sandbox) == []


def test_an_image_without_a_shell_fails_with_the_entry_command_code(
    containers: Harness, container_sandbox: ContainerSandbox, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-rootfs"
    (empty / "etc").mkdir(parents=True)
    image = container_sandbox.image_from(empty, "pai-test/empty:1")

    result = containers.run("shell-less", "echo never", docker_image=image)

    assert (result.exit_code, result.classification.phrase) == (
        -1203,
        "ContainerDockerStartCmdNotFound",
    )
    assert "has no /bin/sh" in result.classification.diagnostics[0]


def test_usage_of_a_container_task_is_read_from_its_cgroup(containers: Harness) -> None:
    # 64 MB held in the container's /dev/shm, and a shell loop that keeps a core busy.
    script = (
        "dd if=/dev/zero of=/dev/shm/held bs=1M count=64 2>/dev/null\n"
        "echo ready\n"
        "while :; do :; done\n"
    )
    containers.launch("busy", script, memory_mb=256, shm_mb=128)
    containers.wait_until(lambda: b"ready" in containers.executor.logs("busy"))
    containers.poll()

    usage = containers.usage_while_busy("busy")["busy"]

    assert usage.cpu_percent <= 110  # one core at most
    assert 64 * 1024**2 <= usage.memory_bytes < 256 * 1024**2
    assert usage.memory_limit_bytes == 256 * 1024**2
    containers.executor.kill("busy", KillReason.STOP_REQUESTED)
    containers.wait_finished("busy")


def test_containers_left_by_an_earlier_control_plane_are_removed_when_it_starts(
    containers: Harness, container_sandbox: ContainerSandbox, busybox_image: str
) -> None:
    containers.run("pulls-the-image", "true")
    executor_id = (containers.root / "state" / "executor-id").read_text()
    container_sandbox.podman(
        "run", "--detach", "--name", "leftover", "--label", f"pai.executor={executor_id}",
        busybox_image, "sleep", "600",
    )  # fmt: skip

    containers.new_executor().recover()

    assert podman_names(container_sandbox) == []
