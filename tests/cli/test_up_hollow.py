"""`pai up --engine hollow` refuses what it cannot emulate, in one sentence, before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.pai_runner import make_pai
from e2e.pai_process import free_port


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((), "error: --engine hollow needs --hollow-nodes N (or PAI_HOLLOW_NODES), or a cluster"),
        (("--hollow-nodes", "2", "--hollow-cpus", "4"), "error: --hollow-cpus: at least one CPU"),
        (("--hollow-nodes", "100001"), "error: --hollow-nodes: between 1 and 100000 nodes"),
    ],
)
def test_pai_up_with_hollow_nodes_it_cannot_make_says_why(
    tmp_path: Path, options: tuple[str, ...], message: str
) -> None:
    pai = make_pai(tmp_path)
    home = tmp_path / "home"
    result = pai.run(
        "up", "--port", str(free_port()), "--home", str(home), "--engine", "hollow", *options
    )
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert said.startswith(message), said
    assert not (home / "pai.db").exists()
