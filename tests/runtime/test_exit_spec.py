"""The exit spec: which failures are retried, and what the user is shown about them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pai.runtime.exitspec import (
    Behavior,
    ExitCode,
    ExitSpecError,
    ExitSpecSource,
    FailureType,
    builtin_exit_spec,
    load_exit_spec,
)

SPEC = builtin_exit_spec()


def python_failure(source: str, tmp_path: Path) -> tuple[int, str]:
    """Run a Python script for real and return its exit status and its output."""
    script = tmp_path / "train.py"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout + done.stderr


def test_python_syntax_error_is_permanent_and_shows_the_offending_line(tmp_path: Path) -> None:
    status, output = python_failure("import os\n\ndef train(:\n    pass\n", tmp_path)

    verdict = SPEC.classify(status, output, "")

    assert (verdict.code, verdict.phrase) == (231, "ContainerSyntaxError")
    assert verdict.permanent and not verdict.transient
    assert verdict.type is FailureType.USER_FAILURE
    assert verdict.origin_exit_code == 1
    assert any("def train(:" in line for line in verdict.diagnostics)
    assert verdict.matched_user_log is not None
    assert verdict.matched_user_log.startswith("SyntaxError:")


@pytest.mark.parametrize(
    "source",
    ["import no_such_module_for_pai\n", "from os import no_such_name_for_pai\n"],
    ids=["ModuleNotFoundError", "ImportError"],
)
def test_import_errors_are_permanent(source: str, tmp_path: Path) -> None:
    status, output = python_failure(source, tmp_path)

    verdict = SPEC.classify(status, output, "")

    assert verdict.code == 232
    assert verdict.behavior is Behavior.PERMANENT
    assert any("no_such" in line for line in verdict.diagnostics)


def test_command_not_found_is_a_user_error() -> None:
    done = subprocess.run(
        ["bash", "-c", "echo preparing; no-such-command-for-pai --train"],
        capture_output=True,
        text=True,
        check=False,
    )

    verdict = SPEC.classify(done.returncode, done.stdout + done.stderr, "")

    assert done.returncode == 127
    assert (verdict.code, verdict.phrase) == (220, "UserCommandExitWithError")
    assert verdict.permanent


def test_unrecognised_failure_is_255_and_counts_against_retries() -> None:
    verdict = SPEC.classify(1, "epoch 1 loss 0.3\nepoch 2 loss nan\n", "")

    assert (verdict.code, verdict.phrase) == (255, "PAIRuntimeUnknownFailed")
    assert verdict.behavior is Behavior.UNKNOWN
    assert not verdict.transient and not verdict.permanent
    assert verdict.origin_exit_code == 1
    assert verdict.diagnostics == ("epoch 1 loss 0.3", "epoch 2 loss nan")


def test_sigkill_is_transient_even_when_the_log_shows_a_user_error() -> None:
    verdict = SPEC.classify(137, "ImportError: cannot import name 'x'\n", "")

    assert (verdict.code, verdict.phrase) == (137, "ContainerSigKillReceived")
    assert verdict.transient


def test_success() -> None:
    verdict = SPEC.classify(0, "done\n", "")

    assert verdict.succeeded
    assert verdict.phrase == "Succeeded"


def test_pattern_needs_every_present_field() -> None:
    # 220 wants exit code 127 *and* "command not found": either alone is not enough.
    assert SPEC.classify(1, "bash: foo: command not found\n", "").code == 255
    assert SPEC.classify(127, "nothing useful\n", "").code == 255


def test_runtime_log_patterns_read_the_runtime_log() -> None:
    message = "SSH barrier reaches max retry count\n"

    assert SPEC.classify(10, "", message).code == 249
    assert SPEC.classify(10, message, "").code == 255


def test_diagnostics_are_bounded_to_about_fifteen_lines_and_4_kb() -> None:
    noise = [f"step {n} " + "x" * 400 for n in range(200)]
    log = "\n".join([*noise[:100], "ModuleNotFoundError: No module named 'torchx'", *noise[100:]])

    verdict = SPEC.classify(1, log, "")

    assert verdict.code == 232
    assert 1 < len(verdict.diagnostics) <= 15
    assert sum(len(line.encode()) + 1 for line in verdict.diagnostics) <= 4096
    assert "ModuleNotFoundError: No module named 'torchx'" in verdict.diagnostics


def test_diagnostics_show_progress_bars_as_a_terminal_would() -> None:
    log = " 10%|#    | 1/10\r100%|#####| 10/10\nModuleNotFoundError: No module named 'x'\n"

    verdict = SPEC.classify(1, log, "")

    assert verdict.diagnostics == ("100%|#####| 10/10", "ModuleNotFoundError: No module named 'x'")


def test_undefined_codes_are_described_by_the_fallback_records() -> None:
    assert (SPEC.describe(77).code, SPEC.describe(77).phrase) == (77, "PAIRuntimeExitAbnormally")
    assert SPEC.describe(-4242).phrase == "ContainerUndefinedNegativeExitCode"
    assert SPEC.describe(-4242).code == -4242


def test_platform_codes_used_by_the_controller() -> None:
    expectations = {
        ExitCode.STOP_FRAMEWORK_REQUESTED: ("StopFrameworkRequested", FailureType.USER_STOP),
        ExitCode.FRAMEWORK_ATTEMPT_COMPLETION: (
            "FrameworkAttemptCompletion",
            FailureType.USER_STOP,
        ),
        ExitCode.POD_EXTERNAL_DELETED: ("PodExternalDeleted", FailureType.PLATFORM_FAILURE),
        ExitCode.USER_CONTAINER_OOM_KILLED: (
            "UserContainerDockerOOMKilled",
            FailureType.USER_FAILURE,
        ),
        ExitCode.JOB_GANG_ALLOCATION_TIMEOUT: (
            "JobGangAllocationTimeout",
            FailureType.RESOURCE_ALLOCATION_TIMEOUT,
        ),
        ExitCode.CONTAINER_PORT_CONFLICT: ("ContainerPortConflict", FailureType.PLATFORM_FAILURE),
    }
    for code, (phrase, failure_type) in expectations.items():
        verdict = SPEC.for_code(code, diagnostics=("why",))
        assert (verdict.phrase, verdict.type) == (phrase, failure_type)
    assert SPEC.for_code(ExitCode.POD_EXTERNAL_DELETED).transient
    assert SPEC.for_code(ExitCode.STOP_FRAMEWORK_REQUESTED).permanent
    assert SPEC.for_code(ExitCode.USER_CONTAINER_OOM_KILLED).permanent
    assert (
        SPEC.describe(ExitCode.JOB_GANG_ALLOCATION_TIMEOUT).behavior is Behavior.TRANSIENT_CONFLICT
    )


def test_every_platform_code_and_every_rule_of_the_reference_table_is_shipped() -> None:
    codes = {record.code for record in SPEC.records}
    reference_table = {
        0, -101, -120, -200, -210, -220, -300, -1000, -1001, -1100, -1200, -1203, -1205,
        137, 143, 139, 134, 220, 221, 223, 226, 231, 232, 249, 251, 253, 254, 255, 256,
        128, 130, 131, 132, 135, 136, 141, 222, 224, 225, 228, 229, 230, 233, 234, 235, 250, 252,
    }  # fmt: skip
    assert reference_table <= codes
    assert {int(code) for code in ExitCode} <= codes


def test_every_shipped_record_is_complete() -> None:
    for record in SPEC.records:
        assert record.reason, record.code
        assert record.repro, record.code
        if record.type not in (FailureType.USER_SUCCESS, FailureType.USER_STOP):
            assert record.solution, record.code


def test_classification_survives_a_round_trip_through_json() -> None:
    verdict = SPEC.classify(1, "ModuleNotFoundError: No module named 'x'\n", "")

    assert type(verdict).from_dict(verdict.to_dict()) == verdict


ADMIN_NCCL_RULE = """
spec:
  - code: 240
    phrase: NcclTimeout
    issuer: PAI_RUNTIME
    causer: PAI_HW
    type: PLATFORM_FAILURE
    stage: RUNNING
    behavior: TRANSIENT
    reaction: ALWAYS_RETRY
    reason: NCCL timed out, usually a flaky link
    pattern:
      runtimeContainerPatterns:
        - userLogRegex: "NCCL.*[Tt]imeout"
"""


def test_admin_rules_come_first_and_override_built_in_codes(tmp_path: Path) -> None:
    admin = tmp_path / "exit-spec.yaml"
    admin.write_text(
        ADMIN_NCCL_RULE
        + """
  - code: 232
    phrase: ContainerImportError
    type: USER_FAILURE
    behavior: TRANSIENT
    reaction: ALWAYS_RETRY
    reason: our package mirror is flaky, so import errors are retried here
    pattern:
      runtimeContainerPatterns:
        - userLogRegex: "ModuleNotFoundError"
"""
    )
    spec = load_exit_spec(admin)

    # The admin rule wins over the built-in 255 fallback and over later built-in rules.
    nccl = spec.classify(1, "NameError: name 'x' is not defined\nNCCL watchdog Timeout\n", "")
    assert (nccl.code, nccl.transient) == (240, True)
    assert spec.classify(1, "ModuleNotFoundError: No module named 'y'\n", "").transient
    assert [record.code for record in spec.records].count(232) == 1


def test_admin_file_is_reloaded_on_change_and_a_broken_one_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    admin = tmp_path / "exit-spec.yaml"
    source = ExitSpecSource(admin)
    nccl_log = "NCCL watchdog Timeout\n"
    assert source.current().classify(1, nccl_log, "").code == 255

    admin.write_text(ADMIN_NCCL_RULE)
    assert source.current().classify(1, nccl_log, "").code == 240
    assert source.last_error is None

    admin.write_text(ADMIN_NCCL_RULE.replace('"NCCL.*[Tt]imeout"', '"NCCL(unclosed"'))
    os.utime(admin, ns=(1, 1))  # a different mtime even on coarse-grained file systems
    assert source.current().classify(1, nccl_log, "").code == 240
    assert source.last_error is not None
    assert "userLogRegex" in source.last_error and "code 240" in source.last_error

    admin.unlink()
    assert source.current().classify(1, nccl_log, "").code == 255
    assert source.last_error is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spec: [", "not valid YAML"),
        ("rules: []", "'spec'"),
        (
            "spec:\n  - code: 240\n    phrase: X\n    behavior: SOMETIMES\n",
            ":4: spec[0].behavior (code 240)",
        ),
        (
            "spec:\n  - code: 240\n    phrase: X\n    pattern:\n"
            "      runtimeContainerPatterns:\n        - {}\n",
            "at least one of exitCode",
        ),
        ("spec:\n  - code: 999\n    phrase: X\n", "spec[0].code (code 999)"),
        (
            "spec:\n  - code: 240\n    phrase: X\n  - code: 240\n    phrase: Y\n",
            ":4: spec[1]: code 240 already defined",
        ),
        ("spec:\n  - code: 240\n    phrase: ContainerImportError\n", "phrases must be unique"),
    ],
)
def test_a_bad_admin_file_is_rejected_with_where_and_why(
    tmp_path: Path, text: str, expected: str
) -> None:
    admin = tmp_path / "exit-spec.yaml"
    admin.write_text(text)

    with pytest.raises(ExitSpecError) as error:
        load_exit_spec(admin)

    assert expected in str(error.value)
    assert str(admin) in str(error.value)
