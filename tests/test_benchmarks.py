"""Every benchmark the README's numbers come from still starts: a benchmark that imports a
function the platform no longer has fails here, not when someone next measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda path: path.stem)
def test_a_benchmark_starts_and_explains_its_options(benchmark: Path) -> None:
    shown = subprocess.run(
        [sys.executable, str(benchmark), "--help"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage:") and "--json" in shown.stdout
