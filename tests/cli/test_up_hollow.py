"""`pai up --engine hollow`: which nodes it emulates, and what it refuses to, in one sentence,
before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.pai_runner import make_pai
from e2e.pai_process import free_port
from pai.cli.up import choose_hollow_cluster
from pai.cluster import cluster_from_file
from pai.settings import Settings
from server.harness import LOCAL_CLUSTER_FILE


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


def test_a_cluster_file_names_the_hollow_nodes_and_without_one_the_count_does(
    tmp_path: Path,
) -> None:
    settings = Settings.from_env(
        {"PAI_HOME": str(tmp_path), "PAI_ENGINE": "hollow", "PAI_HOLLOW_NODES": "3"}
    )
    named = choose_hollow_cluster(settings, LOCAL_CLUSTER_FILE)
    assert [node.name for node in named.nodes] == [
        node.name for node in cluster_from_file(LOCAL_CLUSTER_FILE).nodes
    ]
    # The file is kept for other engines' restarts; hollow nodes come from what a start asks.
    counted = choose_hollow_cluster(settings, None)
    assert [node.name for node in counted.nodes] == [
        "hollow-00001",
        "hollow-00002",
        "hollow-00003",
    ]
