"""The openb trace, its cluster file, and the inflation replay of GPU-sharing pods through PAI's
scheduler under every placement policy (the numbers themselves: benchmarks/gpushare.py)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pai.cluster import load_cluster
from pai.scheduler.fragmentation import FragmentationPolicy
from pai.scheduler.types import GpuShare
from pai.sim.inflation import (
    Arrival,
    draw_arrivals,
    guarantee_margins,
    replay_inflation,
    replay_with_vcs,
)
from pai.sim.openb import (
    OpenbFormatError,
    OpenbNode,
    OpenbPod,
    node_list_beside,
    openb_cluster,
    read_nodes,
    read_pods,
)
from pai.sim.sharepolicies import SHARE_POLICIES, ClusterScale, make_share_policy

FIXTURES = Path(__file__).parent / "fixtures" / "openb"
PODS = FIXTURES / "openb_pod_list_tiny.csv"
BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "gpushare.py"
SCALE = ClusterScale(32000, 4000)


def nodes() -> tuple[OpenbNode, ...]:
    return read_nodes(node_list_beside(PODS))


def pod(gpus: int, milli: int, cpu: int = 1000, memory: int = 1024) -> OpenbPod:
    return OpenbPod(f"p-{gpus}-{milli}", cpu, memory, gpus, milli)


def test_pods_are_read_with_their_share_of_a_gpu(tmp_path: Path) -> None:
    packed = tmp_path / "pods.csv.gz"
    packed.write_bytes(gzip.compress(PODS.read_bytes()))

    pods = read_pods(packed)

    assert pods == read_pods(PODS)
    assert [(p.gpus, p.gpu_milli, p.gpu_demand) for p in pods] == [
        (1, 500, 0.5),
        (1, 250, 0.25),
        (1, 1000, 1.0),
        (0, 0, 0.0),
        (2, 1000, 2.0),
        (1, 750, 0.75),
    ]
    assert pods[0].request("g", "default", 10).pods[0].share == GpuShare(500)
    assert pods[3].request("g", "default", 10).pods[0].share == GpuShare(0)  # CPU only
    assert pods[4].request("g", "default", 10).pods[0].share is None  # two whole GPUs


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p,1000,1024,1,1500,,LS,Running,0,1,0", "gpu_milli 1500 does not go with num_gpu 1"),
        ("p,1000,1024,2,500,,LS,Running,0,1,0", "gpu_milli 500 does not go with num_gpu 2"),
        ("p,1000,1024,1,250,V100M32,LS,Running,0,1,0", "asks for GPU models 'V100M32'"),
        ("p,lots,1024,1,250,,LS,Running,0,1,0", "cpu_milli must be an integer, got 'lots'"),
    ],
)
def test_a_bad_pod_is_refused_with_its_line(tmp_path: Path, row: str, message: str) -> None:
    header = PODS.read_text().splitlines()[0]
    path = tmp_path / "pods.csv"
    path.write_text(f"{header}\n{row}\n")

    with pytest.raises(OpenbFormatError) as refused:
        read_pods(path)

    assert f"{path}:2:" in str(refused.value) and message in str(refused.value)


def test_the_cluster_has_a_chain_per_node_shape_and_a_gpu_per_leaf_cell() -> None:
    cluster = load_cluster(openb_cluster(nodes()))

    assert sorted(cluster.chains) == ["T4-2gpu-16cpu-64gb", "V100M16-4gpu-32cpu-128gb"]
    sku = cluster.chain_sku("T4-2gpu-16cpu-64gb")
    assert (sku.gpu, sku.cpu, sku.memory_mb) == (1, 8, 32768)
    assert [vc for vc in cluster.virtual_clusters] == ["default"]
    by_model = load_cluster(openb_cluster(nodes(), "models"))
    assert sorted(by_model.virtual_clusters) == ["T4", "V100M16"]


def test_arrivals_are_drawn_by_seed_until_they_ask_for_the_target() -> None:
    pods = read_pods(PODS)

    arrivals = draw_arrivals(pods, 12, seed=42, target=130)

    assert arrivals == draw_arrivals(pods, 12, seed=42, target=130)
    assert arrivals != draw_arrivals(pods, 12, seed=43, target=130)
    asked = sum(a.pod.gpu_demand for a in arrivals)
    assert asked >= 0.13 * 120 and asked - arrivals[-1].pod.gpu_demand < 0.13 * 120
    split = draw_arrivals(pods, 12, seed=42, vc_weights={"T4": 4, "V100M16": 8})
    assert {a.vc for a in split} == {"T4", "V100M16"}


def test_shares_fill_gpus_so_the_whole_gpus_after_them_still_fit() -> None:
    cluster = load_cluster(openb_cluster(nodes()[2:3]))  # one T4 node: 2 GPUs, 16 CPUs
    arrivals = [Arrival(p, "default") for p in (pod(1, 500), pod(1, 500), pod(1, 1000))]

    result = replay_inflation(
        cluster, arrivals, "pai", FragmentationPolicy(), seed=0, overflow=False
    )

    assert result.arrived == [25.0, 50.0, 100.0]
    assert result.allocated == [25.0, 50.0, 100.0]  # the halves shared one GPU
    assert result.placed == 3 and result.allocation_at(100) == 100.0


@pytest.mark.parametrize("policy", sorted(SHARE_POLICIES))
def test_every_policy_places_within_the_cluster(policy: str) -> None:
    pods = read_pods(PODS)
    cluster = load_cluster(openb_cluster(nodes()))
    arrivals = draw_arrivals(pods, 12, seed=42)

    result = replay_inflation(
        cluster, arrivals, policy, make_share_policy(policy, pods, SCALE, 42), seed=42
    )

    assert len(result.allocated) == len(arrivals)
    assert all(0 <= a <= b + 1e-9 for a, b in zip(result.allocated, result.arrived, strict=True))
    assert all(x <= y + 1e-9 for x, y in zip(result.allocated, result.allocated[1:], strict=False))
    assert 0 < result.allocated[-1] <= 100


def test_with_vcs_each_vc_holds_at_least_what_it_would_alone_on_its_cells() -> None:
    pods = read_pods(PODS)
    cluster = load_cluster(openb_cluster(nodes(), "models"))
    arrivals = draw_arrivals(pods, 12, seed=7, vc_weights={"T4": 4, "V100M16": 8})

    run = replay_with_vcs(cluster, arrivals, FragmentationPolicy, seed=7)

    assert set(run.margins) == {"T4", "V100M16"}
    assert all(margin >= 0 for margin in run.margins.values()), run.margins
    assert run.margins == guarantee_margins(run.shared, run.alone)
    assert run.shared.allocated[-1] >= run.alone.allocated[-1]


def test_the_benchmark_prints_each_policys_allocation(tmp_path: Path) -> None:
    plot = tmp_path / "allocation.png"
    command = [sys.executable, str(BENCHMARK), "--json", "--trace", str(PODS), "--seeds", "1-2"]
    command += ["--policies", "best-fit,pai", "--plot", str(plot)]

    answer = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)

    report = json.loads(answer.stdout)
    assert (report["workload"], report["gpus"], report["seeds"]) == (
        "openb_pod_list_tiny",
        12,
        [1, 2],
    )
    assert set(report["policies"]) == {"best-fit", "pai"}
    for row in report["policies"].values():
        assert set(row) == {"alloc_at_100", "alloc_at_130", "seconds", "cpu_seconds"}
        assert 0 < row["alloc_at_100"] <= row["alloc_at_130"] <= 100
    assert plot.read_bytes().startswith(b"\x89PNG")
