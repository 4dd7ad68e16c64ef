"""A 200 MB file goes into a directory storage and an S3 storage and back out with
`pai storage cp`, while neither the server (`pai up`, a process of its own) nor the `pai`
command holds it in memory: each one's resident memory stays far below the file's size.

The measuring is the storage benchmark's (`benchmarks/storage.py`, which also checks that the
file comes back unchanged); this test holds its results to the bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from server.storagehelpers import moto_server_command

pytestmark = pytest.mark.slow

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "storage.py"
FILE_MIB = 200
SERVER_GROWTH_LIMIT_MIB = 64
"""What the server may add to its resident memory while moving the file (pieces of 8 MiB)."""
CLIENT_LIMIT_MIB = 150
"""What the `pai` process may use in all: its interpreter and libraries (about 100 MiB), plus
one piece."""


def test_a_200_mb_file_goes_in_and_out_with_flat_memory(
    requirement: Callable[[bool, str], None],
) -> None:
    requirement(
        moto_server_command() is not None,
        "moto's S3 server is not installed (pip install 'moto[s3]' flask flask-cors)",
    )
    measured = subprocess.run(
        [sys.executable, str(BENCHMARK), "--json", "--mb", str(FILE_MIB)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert measured.returncode == 0, measured.stderr
    rows = json.loads(measured.stdout)
    assert {(row["kind"], row["direction"]) for row in rows} == {
        (kind, direction) for kind in ("directory", "s3") for direction in ("upload", "download")
    }
    for row in rows:
        assert row["server_growth_mib"] < SERVER_GROWTH_LIMIT_MIB, row
        assert row["client_peak_mib"] < CLIENT_LIMIT_MIB, row
