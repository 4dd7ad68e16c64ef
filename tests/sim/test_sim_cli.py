"""`pai sim` as a user runs it: the installed command on a tiny trace and cluster files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from replay_helpers import trace
from typer.testing import CliRunner

from pai.cli.main import app
from pai.sim.clusters import make_cluster, write_cluster_file
from pai.sim.traces import write_trace_csv

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ("queuing_delay_by_vc.png", "queuing_delay_cdf.png", "gpu_allocation.png")


def pai(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "pai"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pai.cli.main"]
    env = {**os.environ, "COLUMNS": "200"}  # tables unwrapped whatever the caller's terminal
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A 4-job trace where quota scheduling fragments (see test_replay), a 2-node cluster where
    VCs a and b own one node each, and a 3-node one where b owns two."""
    jobs = trace(
        ("a1", "a", 0, 4, 1000),
        ("b1", "b", 1, 4, 10),
        ("a2", "a", 2, 4, 2000),
        ("b2", "b", 12, 8, 100),
    )
    write_trace_csv(jobs, tmp_path / "tiny.csv")
    write_cluster_file(make_cluster(2, 8, None, {"a": 1, "b": 1}), tmp_path / "two-nodes.yaml")
    write_cluster_file(make_cluster(3, 8, None, {"a": 1, "b": 2}), tmp_path / "three-nodes.yaml")
    return tmp_path


def test_sim_writes_the_report_the_plots_and_the_json(inputs: Path) -> None:
    done = pai(
        "sim", "--trace", "tiny.csv", "--cluster", "two-nodes.yaml",
        "--policies", "hived,quota,private", "--out", "report", "--json",
        cwd=inputs,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [(r["policy"], r["cluster"], r["jobs"]) for r in results] == [
        ("hived", "two-nodes", 4),
        ("quota", "two-nodes", 4),
        ("private", "two-nodes", 4),
    ]
    hived, quota, private = results
    assert quota["vcs"]["b"]["sharing_anomaly_s"] == 494.0
    assert quota["vcs"]["b"]["queuing_delay_mean_s"] == 494.0
    assert quota["vcs"]["b"]["queuing_delay_p95_s"] == round(0.95 * 988, 1)
    assert hived["vcs"]["b"]["sharing_anomaly_s"] == 0.0
    assert private["vcs"]["b"]["jct_mean_s"] == (10 + 100) / 2
    for result in results:
        assert 0 < result["gpu_allocation_rate"] < 1
        assert set(result["vcs"]) == {"a", "b"}

    folder = inputs / "report"
    for name in (*PLOTS, "sharing_anomaly.png"):
        assert (folder / name).read_bytes().startswith(PNG_MAGIC), name
    assert json.loads((folder / "results.json").read_text()) == results
    report = (folder / "report.md").read_text()
    assert "pai sim --trace tiny.csv --cluster two-nodes.yaml" in report
    assert "## Sharing anomaly per VC" in report
    assert "![Queuing delay distribution per VC](queuing_delay_cdf.png)" in report
    assert "| `b` | 8 | 2 | 0.0 | 8.2 | 0.0 |" in report  # mean delays: hived, quota, private


def test_sim_compares_two_cluster_files_side_by_side(inputs: Path) -> None:
    done = pai(
        "sim", "--trace", "tiny.csv", "--cluster", "two-nodes.yaml",
        "--compare-cluster", "three-nodes.yaml", "--policies", "quota,private", "--out", "what-if",
        cwd=inputs,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "three-nodes" in done.stdout
    results = json.loads((inputs / "what-if" / "results.json").read_text())
    by_run = {(r["policy"], r["cluster"]): r for r in results}
    assert set(by_run) == {
        ("quota", "two-nodes"),
        ("private", "two-nodes"),
        ("quota", "three-nodes"),
        ("private", "three-nodes"),
    }
    # With two nodes of its own, b's 8-GPU job finds a whole node under quota too.
    assert by_run[("quota", "two-nodes")]["vcs"]["b"]["sharing_anomaly_s"] == 494.0
    assert by_run[("quota", "three-nodes")]["vcs"]["b"]["sharing_anomaly_s"] == 0.0


def test_sim_explains_bad_arguments(inputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(inputs)
    runner = CliRunner()

    def error_of(*args: str) -> str:
        done = runner.invoke(app, ["sim", *args])
        assert done.exit_code == 1, done.output
        return done.stderr

    assert "error: --policies 'hived,fifo': unknown policy fifo" in error_of(
        "--trace", "tiny.csv", "--cluster", "two-nodes.yaml", "--policies", "hived,fifo"
    )
    write_cluster_file(make_cluster(1, 8, None, {"a": 1}), inputs / "only-a.yaml")
    assert "error: the cluster has no VC named b" in error_of(
        "--trace", "tiny.csv", "--cluster", "only-a.yaml"
    )
    assert "--cluster is required" in error_of("--trace", "tiny.csv")
    assert "--alignment applies to the per-VC Philly trace" in error_of(
        "--trace", "tiny.csv", "--alignment", "end", "--cluster", "two-nodes.yaml"
    )
    assert "give either --trace or --from-history" in error_of("--cluster", "two-nodes.yaml")
    assert "unknown policy pai+fast; policies: " in error_of(
        "--trace", "tiny.csv", "--cluster", "two-nodes.yaml", "--policies", "pai+fast"
    )
    assert "the limit's share of a VC must be in (0, 1], got 2" in error_of(
        "--trace", "tiny.csv", "--cluster", "two-nodes.yaml", "--user-limit-share", "2"
    )
    assert not (inputs / "sim-report").exists()  # nothing written on a bad argument


def test_sim_shares_vcs_between_users_and_reports_it(inputs: Path) -> None:
    done = pai(
        "sim", "--trace", "tiny.csv", "--cluster", "two-nodes.yaml", "--users-per-vc", "3",
        "--policies", "hived,hived+fair+limits", "--user-limit-share", "0.5", "--out", "users",
        cwd=inputs,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "LIGHT USERS P95" in done.stdout and "JAIN" in done.stdout
    fifo, shared = json.loads((inputs / "users" / "results.json").read_text())
    assert fifo["policy"] == "hived" and shared["policy"] == "hived+fair+limits"
    assert fifo["unfinished_jobs"] == 0 and fifo["users"] > 0
    # b2 asks for 8 GPUs, more than a user of b may have (4): never refused, it waits (and
    # under hived, without overflow, waits until the replay ends)
    assert (shared["refused_jobs"], shared["unfinished_jobs"]) == (0, 1)
    assert 0 < fifo["jain_fairness_index"] <= 1
    report = (inputs / "users" / "report.md").read_text()
    assert "users assigned (the trace records none)" in report
    assert "--users-per-vc 3 --user-limit-share 0.5" in report
    assert "## 95th percentile queuing delay of the light users' jobs per VC" in report
    plot = inputs / "users" / "queuing_delay_by_user_weight.png"
    assert plot.read_bytes().startswith(PNG_MAGIC)
