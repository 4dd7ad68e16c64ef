"""The local executor runs real tasks: environment, logs, events and failure classification."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pai.executors.base import ExecutorError, LogStream, TaskEventKind, UnknownTaskError

if TYPE_CHECKING:
    from conftest import Harness

PYTHON = sys.executable


def test_task_runs_in_its_directory_with_its_environment(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAI_TEST_PLATFORM_SECRET", "platform-only")
    result = harness.run(
        "env-task",
        'echo "cwd=$PWD"\necho "role=$PAI_CURRENT_TASK_ROLE_NAME"\n'
        'echo "leak=${PAI_TEST_PLATFORM_SECRET:-none}"\ncommand -v ls >/dev/null && echo path-ok\n',
        env={"PAI_CURRENT_TASK_ROLE_NAME": "worker"},
    )

    out = harness.executor.logs("env-task", LogStream.STDOUT).decode()
    assert result.exit_code == 0 and result.classification.succeeded
    assert f"cwd={harness.root / 'work' / 'env-task'}" in out
    assert "role=worker" in out
    assert "leak=none" in out  # the platform's own environment does not reach tasks
    assert "path-ok" in out


def test_events_and_result_of_a_successful_task(harness: Harness) -> None:
    result = harness.run("ok-task", "echo hello")

    kinds = [event.kind for event in harness.events["ok-task"]]
    assert kinds == [TaskEventKind.STARTED, TaskEventKind.FINISHED]
    assert result.classification.phrase == "Succeeded"
    assert result.started_at is not None and result.started_at <= result.finished_at
    assert result.isolation == "host"


def test_stdout_and_stderr_are_kept_apart_and_together(harness: Harness) -> None:
    harness.run("log-task", "echo to-out\necho to-err >&2\n")

    logs = harness.executor.logs
    assert logs("log-task", LogStream.STDOUT) == b"to-out\n"
    assert logs("log-task", LogStream.STDERR) == b"to-err\n"
    assert sorted(logs("log-task", LogStream.ALL).splitlines()) == [b"to-err", b"to-out"]
    assert logs("log-task", LogStream.ALL, tail=7) in (b"to-out\n", b"to-err\n")


def test_runtime_log_says_the_image_is_not_used(harness: Harness) -> None:
    harness.run("image-task", "true", docker_image="pytorch/pytorch:2.1")

    runtime_log = harness.executor.logs("image-task", LogStream.RUNTIME).decode()
    assert "pytorch/pytorch:2.1 is recorded only" in runtime_log
    assert "directly on the node's host" in runtime_log


def test_python_syntax_error_fails_permanently_with_the_offending_line(harness: Harness) -> None:
    work = harness.root / "work" / "syntax-task"
    work.mkdir(parents=True)
    (work / "train.py").write_text("for epoch in range(3)\n    print(epoch)\n")

    result = harness.run("syntax-task", f"{PYTHON} train.py")

    assert result.exit_code == 231
    assert result.classification.permanent
    assert any("for epoch in range(3)" in line for line in result.classification.diagnostics)


@pytest.mark.parametrize(
    ("script", "code", "phrase"),
    [
        (f"{PYTHON} -c 'import no_such_module_for_pai'", 232, "ContainerImportError"),
        ("echo starting\nno-such-command-for-pai --epochs 3", 220, "UserCommandExitWithError"),
        ("echo epoch 1\nexit 1", 255, "PAIRuntimeUnknownFailed"),
    ],
    ids=["import-error", "command-not-found", "unrecognised"],
)
def test_failures_are_classified(harness: Harness, script: str, code: int, phrase: str) -> None:
    result = harness.run(f"fail-{code}", script)

    assert (result.exit_code, result.classification.phrase) == (code, phrase)


def test_the_script_never_lands_on_disk(harness: Harness) -> None:
    token = "s3cr3t-token-for-pai-test"

    harness.run("secret-task", f'TOKEN={token}\ntest -n "$TOKEN"\n')

    for path in harness.root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_a_task_key_is_launched_once_and_must_be_safe(harness: Harness) -> None:
    harness.run("once", "true")

    with pytest.raises(ExecutorError, match="launched before"):
        harness.launch("once", "true")
    with pytest.raises(ExecutorError, match="task key"):
        harness.launch("../escape", "true")
    with pytest.raises(UnknownTaskError):
        harness.executor.logs("never-launched")


def test_follow_yields_output_as_it_comes_until_the_task_ends(harness: Harness) -> None:
    harness.launch("follow-task", "for i in 1 2 3 4 5; do echo line-$i; sleep 0.1; done")

    followed = b"".join(
        harness.executor.follow_logs("follow-task", LogStream.STDOUT, tail=None, poll_interval=0.05)
    )

    assert followed == b"".join(f"line-{i}\n".encode() for i in range(1, 6))
    assert harness.wait_finished("follow-task").exit_code == 0


def test_log_cap_keeps_the_tail(harness: Harness) -> None:
    cap = 64 * 1024
    harness.executor = harness.new_executor("state-capped", log_cap_bytes=cap)
    lines = 20000  # about 250 KB of output, four times the cap

    harness.run("chatty", f'for i in $(seq 1 {lines}); do echo "line $i"; done')

    log_dir = Path(harness.root / "logs" / "chatty")
    on_disk = sum(path.stat().st_size for path in log_dir.glob("user-stdout*"))
    kept = harness.executor.logs("chatty", LogStream.STDOUT)
    assert on_disk <= cap
    assert len(kept) >= cap // 2
    assert kept.endswith(f"line {lines}\n".encode())
    assert b"line 1\n" not in kept
    assert harness.executor.logs("chatty", LogStream.STDOUT, tail=11) == f"line {lines}\n".encode()
