"""Generated cluster files: topology, quota mapping, feasibility, YAML, and the shipped inputs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai.sim.clusters import (
    InfeasibleQuotaError,
    NodePool,
    apportion,
    build_cluster,
    check_quota_feasibility,
    cluster_yaml,
    intra_node_levels,
    itp_cluster,
    make_cluster,
    node_quotas,
    philly_cluster,
    read_machine_list,
    read_vc_node_quotas,
    vc_shares,
    write_cluster_file,
)
from pai.sim.traces import Trace, TraceFormatError, TraceJob, load_trace

MACHINES = """\
machineId, number of GPUs, single GPU mem
m0,2, 12GB
m1,8, 24GB
m2,8, 24GB
m3,2, 12GB
m10,8, 24GB
m5,2, 12GB
m6,0, 12GB
m7,2, 12GB
m4,8, 24GB
"""


def leaves_under(cluster: Mapping[str, Any], cell_type: str) -> int:
    types = cluster["physicalCluster"]["cellTypes"]
    count = 1
    while cell_type in types:
        count *= types[cell_type]["childCellNumber"]
        cell_type = types[cell_type]["childCellType"]
    return count


def total_gpus(cluster: Mapping[str, Any]) -> int:
    cells = cluster["physicalCluster"]["physicalCells"]
    return sum(leaves_under(cluster, cell["cellType"]) for cell in cells)


def gpus_by_vc(cluster: Mapping[str, Any]) -> dict[str, int]:
    return {
        vc: sum(
            cell["cellNumber"] * leaves_under(cluster, cell["cellType"].split(".")[-1])
            for cell in spec["virtualCells"]
        )
        for vc, spec in cluster["virtualClusters"].items()
    }


def small_trace() -> Trace:
    """VC a runs 1-GPU jobs (100 GPU-h), b 8-GPU jobs (80 GPU-h), c is not in the quota list."""
    jobs = (
        TraceJob("a1", "a", None, 0, 1, 100 * 3600.0),
        TraceJob("b1", "b", None, 1, 8, 10 * 3600.0),
        TraceJob("c1", "c", None, 2, 1, 20 * 3600.0),
    )
    return Trace("small", jobs, {})


@pytest.fixture
def philly_inputs(tmp_path: Path) -> tuple[Path, Path]:
    machines = tmp_path / "machines.csv"
    machines.write_text(MACHINES)
    quotas = tmp_path / "quotas.csv"
    quotas.write_text("vc,node num\na,3\nb,1\n")
    return machines, quotas


# -- building blocks -------------------------------------------------------------------------


def test_intra_node_topology_pairs_gpus_and_switches() -> None:
    assert intra_node_levels(8) == [("PCIE", 2), ("SOCKET", 2), ("NODE", 2)]
    assert intra_node_levels(4) == [("PCIE", 2), ("NODE", 2)]
    assert intra_node_levels(2) == [("NODE", 2)]
    assert intra_node_levels(6) == [("PCIE", 2), ("NODE", 3)]
    assert intra_node_levels(1) == [("NODE", 1)]


def test_apportion_is_exact_and_respects_minimums() -> None:
    assert apportion(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    # b's exact share (0.1) is below its minimum: it gets 3, the other 7 are re-split.
    assert apportion(10, {"a": 98, "b": 1, "c": 1}, {"b": 3}) == {"a": 7, "b": 3, "c": 0}
    assert apportion(5, {"a": 0, "b": 0}) == {"a": 3, "b": 2}
    with pytest.raises(ValueError, match="add up to 12, more than 10"):
        apportion(10, {"a": 1, "b": 1}, {"a": 6, "b": 6})
    with pytest.raises(ValueError, match="weight of 'a' must be a finite number >= 0"):
        apportion(10, {"a": -1})


# -- feasibility -----------------------------------------------------------------------------


def example_cluster(vc_c_sockets: int = 2) -> dict[str, Any]:
    """2 racks x 4 nodes x 8 GPUs; VC a: 2 nodes + a pinned node, b: a rack, c: sockets."""
    return {
        "physicalCluster": {
            "cellTypes": {
                "V100-PCIE": {"childCellType": "V100", "childCellNumber": 2},
                "V100-SOCKET": {"childCellType": "V100-PCIE", "childCellNumber": 2},
                "V100-NODE": {
                    "childCellType": "V100-SOCKET",
                    "childCellNumber": 2,
                    "isNodeLevel": True,
                },
                "V100-RACK": {"childCellType": "V100-NODE", "childCellNumber": 4},
            },
            "physicalCells": [
                {
                    "cellType": "V100-RACK",
                    "cellChildren": [{"cellAddress": f"r0-n{i}"} for i in range(4)],
                },
                {
                    "cellType": "V100-RACK",
                    "cellChildren": [
                        {"cellAddress": "r1-n0"},
                        {"cellAddress": "r1-n1"},
                        {"cellAddress": "r1-n2"},
                        {"cellAddress": "r1-n3", "pinnedCellId": "a-pinned"},
                    ],
                },
            ],
        },
        "virtualClusters": {
            "a": {
                "virtualCells": [{"cellType": "V100-RACK.V100-NODE", "cellNumber": 2}],
                "pinnedCells": [{"pinnedCellId": "a-pinned"}],
            },
            "b": {"virtualCells": [{"cellType": "V100-RACK", "cellNumber": 1}]},
            "c": {
                "virtualCells": [
                    {"cellType": "V100-RACK.V100-NODE.V100-SOCKET", "cellNumber": vc_c_sockets}
                ]
            },
        },
    }


def test_feasibility_walk_accepts_an_exactly_full_cluster() -> None:
    check_quota_feasibility(example_cluster())


def test_feasibility_walk_names_the_level_that_overflows() -> None:
    with pytest.raises(
        InfeasibleQuotaError,
        match="chain V100-RACK: VC c reserve 3 cells of type V100-SOCKET, but only 2 are left",
    ):
        check_quota_feasibility(example_cluster(vc_c_sockets=3))
    cluster = example_cluster()
    cluster["virtualClusters"]["b"]["virtualCells"][0]["cellNumber"] = 2
    # b takes both racks, so no node is left for a's quota or its pinned node.
    with pytest.raises(InfeasibleQuotaError, match="a-pinned reserve 3 cells of type V100-NODE"):
        check_quota_feasibility(cluster)


def test_feasibility_walk_counts_pinned_cells() -> None:
    cluster = example_cluster()
    cluster["virtualClusters"]["a"]["virtualCells"][0]["cellNumber"] = 4
    with pytest.raises(
        InfeasibleQuotaError, match=r"VC a, pinned cell a-pinned reserve 5 cells .* only 4 are left"
    ):
        check_quota_feasibility(cluster)


def test_feasibility_walk_rejects_a_type_outside_the_chain() -> None:
    cluster = example_cluster()
    cluster["virtualClusters"]["c"]["virtualCells"][0]["cellType"] = "V100-RACK.K80-NODE"
    with pytest.raises(InfeasibleQuotaError, match="type K80-NODE in chain V100-RACK"):
        check_quota_feasibility(cluster)


# -- generic clusters ------------------------------------------------------------------------


def test_make_cluster_splits_all_nodes_by_share() -> None:
    cluster = make_cluster(8, 8, 4, {"a": 1, "b": 3})
    assert total_gpus(cluster) == 64
    assert gpus_by_vc(cluster) == {"a": 16, "b": 48}
    racks = cluster["physicalCluster"]["physicalCells"]
    assert [len(rack["cellChildren"]) for rack in racks] == [4, 4]
    assert racks[1]["cellChildren"][0] == {"cellAddress": "node-4"}
    assert cluster["virtualClusters"]["a"]["virtualCells"] == [
        {"cellType": "GPU-RACK.GPU-NODE", "cellNumber": 2}
    ]
    assert cluster["physicalCluster"]["skuTypes"]["GPU"]["gpu"] == 1


def test_make_cluster_gives_every_vc_a_node_and_bare_nodes_without_racks() -> None:
    cluster = make_cluster(3, 2, None, {"big": 100, "tiny": 0.001})
    assert gpus_by_vc(cluster) == {"big": 4, "tiny": 2}
    assert cluster["physicalCluster"]["physicalCells"][0] == {
        "cellType": "GPU-NODE",
        "cellAddress": "node-0",
    }
    assert cluster["virtualClusters"]["tiny"]["virtualCells"][0]["cellType"] == "GPU-NODE"


def test_make_cluster_rejects_uneven_racks() -> None:
    with pytest.raises(ValueError, match=r"10 nodes cannot form racks of 4 .* \[1, 2, 5, 10\]"):
        make_cluster(10, 8, 4, {"a": 1})


def test_build_cluster_rejects_quota_beyond_the_hardware() -> None:
    pool = NodePool("GPU", 8, ("n0", "n1"))
    with pytest.raises(InfeasibleQuotaError, match="VC a, VC b reserve 3 cells of type GPU-NODE"):
        build_cluster([pool], {"a": {"GPU": 2}, "b": {"GPU": 1}})
    with pytest.raises(ValueError, match="VC a: no node pool with GPU type K80"):
        build_cluster([pool], {"a": {"K80": 1}})


# -- Philly mapping on small inputs ----------------------------------------------------------


def test_machine_list_becomes_one_pool_per_node_shape(philly_inputs: tuple[Path, Path]) -> None:
    pools = read_machine_list(philly_inputs[0], rack_sizes={8: 2})
    assert [(p.gpu_type, p.gpus_per_node, p.rack_size) for p in pools] == [
        ("GPU-24GB", 8, 2),
        ("GPU-12GB", 2, None),
    ]
    assert pools[0].node_names == ("m1", "m2", "m4", "m10")  # natural order; m6 has no GPUs
    assert sum(pool.gpus for pool in pools) == 40


def test_unlisted_vc_gets_its_gpu_hour_share(philly_inputs: tuple[Path, Path]) -> None:
    shares = vc_shares(small_trace(), read_vc_node_quotas(philly_inputs[1]))
    # c has 20 of 200 GPU-hours; a and b split the other 90% 3:1.
    assert shares == pytest.approx({"a": 0.675, "b": 0.225, "c": 0.1})


def test_demand_split_gives_each_vc_the_nodes_its_jobs_can_use(
    philly_inputs: tuple[Path, Path],
) -> None:
    pools = read_machine_list(philly_inputs[0], rack_sizes={8: 2})
    shares = {"a": 0.675, "b": 0.225, "c": 0.1}
    # Targets: a 27, b 9, c 4 GPUs. The 2-GPU nodes go to a and c (their jobs fit there); the
    # 8-GPU nodes top each VC up, and every VC gets at least one for its largest job.
    assert node_quotas(pools, shares, small_trace()) == {
        "a": {"GPU-12GB": 3, "GPU-24GB": 2},
        "b": {"GPU-12GB": 0, "GPU-24GB": 1},
        "c": {"GPU-12GB": 1, "GPU-24GB": 1},
    }
    assert node_quotas(pools, shares, small_trace(), "proportional") == {
        "a": {"GPU-12GB": 3, "GPU-24GB": 2},
        "b": {"GPU-12GB": 1, "GPU-24GB": 1},
        "c": {"GPU-12GB": 0, "GPU-24GB": 1},
    }
    with pytest.raises(ValueError, match="unknown pool split 'even'"):
        node_quotas(pools, shares, small_trace(), "even")  # type: ignore[arg-type]


def test_philly_cluster_from_small_inputs(philly_inputs: tuple[Path, Path]) -> None:
    machines, quotas = philly_inputs
    cluster = philly_cluster(
        small_trace(), machine_list=machines, vc_quota_list=quotas, rack_size=2
    )
    assert total_gpus(cluster) == 40
    assert gpus_by_vc(cluster) == {"a": 22, "b": 8, "c": 10}
    assert cluster["virtualClusters"]["b"]["virtualCells"] == [
        {"cellType": "GPU-24GB-RACK.GPU-24GB-NODE", "cellNumber": 1}
    ]
    tops = [cell["cellType"] for cell in cluster["physicalCluster"]["physicalCells"]]
    assert tops == ["GPU-24GB-RACK"] * 2 + ["GPU-12GB-NODE"] * 4


def test_bad_quota_and_machine_files_name_their_line(tmp_path: Path) -> None:
    quotas = tmp_path / "q.csv"
    quotas.write_text("vc,node num\na,3\na,4\n")
    with pytest.raises(TraceFormatError, match=r"q\.csv:3: VC a is listed twice"):
        read_vc_node_quotas(quotas)
    machines = tmp_path / "m.csv"
    machines.write_text("machineId, number of GPUs\nm0,eight\n")
    with pytest.raises(TraceFormatError, match=r"m\.csv:2: column 'number of GPUs'"):
        read_machine_list(machines)


# -- YAML ------------------------------------------------------------------------------------


def test_yaml_keeps_hash_like_vc_names_as_text(tmp_path: Path) -> None:
    cluster = make_cluster(4, 8, None, {"6214e9": 1, "103959": 1, "ee9e8c": 1, "true": 1})
    text = cluster_yaml(cluster)
    assert "'6214e9':" in text and "'103959':" in text and "'true':" in text
    assert "\n  ee9e8c:" in text
    path = write_cluster_file(cluster, tmp_path / "cluster.yaml")
    assert yaml.safe_load(path.read_text()) == cluster
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.yaml"]


# -- the shipped inputs ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def philly_trace() -> Trace:
    return load_trace("philly-vc")


@pytest.mark.parametrize("split", ["demand", "proportional"])
def test_shipped_philly_cluster(philly_trace: Trace, split: str) -> None:
    cluster = philly_cluster(philly_trace, split=split)  # type: ignore[arg-type]
    check_quota_feasibility(cluster)
    assert total_gpus(cluster) == 2_490
    by_vc = gpus_by_vc(cluster)
    assert sorted(by_vc) == list(philly_trace.vcs)
    assert sum(by_vc.values()) == 2_490  # the whole cluster is assigned
    shares = vc_shares(philly_trace, read_vc_node_quotas())
    for vc, gpus in by_vc.items():
        # Each VC's share, within rounding and the one 8-GPU node every VC is guaranteed.
        assert abs(gpus - shares[vc] * 2_490) <= 10, vc
    largest = {vc: max(j.gpus for j in philly_trace if j.vc == vc) for vc in by_vc}
    for vc, spec in cluster["virtualClusters"].items():
        eight_gpu_nodes = sum(
            cell["cellNumber"] for cell in spec["virtualCells"] if "24GB" in cell["cellType"]
        )
        assert eight_gpu_nodes >= math.ceil(largest[vc] / 8), vc
    racks = [c for c in cluster["physicalCluster"]["physicalCells"] if "cellChildren" in c]
    assert len(racks) == 33 and {len(r["cellChildren"]) for r in racks} == {7}


def test_shipped_philly_machine_list() -> None:
    pools = read_machine_list()
    assert [(p.gpu_type, len(p.node_names)) for p in pools] == [
        ("GPU-24GB", 231),
        ("GPU-12GB", 321),
    ]
    assert sum(p.gpus for p in pools) == 2_490
    quotas = read_vc_node_quotas()
    assert len(quotas) == 11 and sum(quotas.values()) == 352


def test_shipped_itp_cluster() -> None:
    trace = load_trace("itp")
    cluster = itp_cluster(trace)
    check_quota_feasibility(cluster)
    assert total_gpus(cluster) == 336 * 8
    by_vc = gpus_by_vc(cluster)
    assert sorted(by_vc) == [f"cluster{i:02d}" for i in range(1, 11)]
    assert sum(by_vc.values()) == 336 * 8
    offered = sum(trace.gpu_hours_by_vc().values()) * 3600 / trace.span_s
    assert offered / total_gpus(cluster) == pytest.approx(0.43, abs=0.01)
    assert by_vc["cluster10"] == 16  # 16-GPU jobs need 2 nodes, more than its GPU-hour share
    assert total_gpus(itp_cluster(trace, target_load=0.86)) == 168 * 8
    with pytest.raises(ValueError, match="target load must be in"):
        itp_cluster(trace, target_load=0)


def test_generated_files_load_in_pais_cluster_loader(philly_trace: Trace, tmp_path: Path) -> None:
    from pai.cluster import cluster_from_file, cluster_from_yaml

    path = write_cluster_file(philly_cluster(philly_trace), tmp_path / "philly.yaml")
    config = cluster_from_file(path)
    assert len(config.nodes) == 552
    assert sum(len(node.leaf_indices) for node in config.nodes) == 2_490
    assert sorted(config.virtual_clusters) == list(philly_trace.vcs)
    assert sorted(config.chains) == ["GPU-12GB-NODE", "GPU-24GB-RACK"]
    itp = cluster_from_yaml(cluster_yaml(itp_cluster()))
    assert len(itp.nodes) == 336 and len(itp.virtual_clusters) == 10
    generic = cluster_from_yaml(cluster_yaml(make_cluster(6, 4, 3, {"a": 1, "b": 2})))
    assert generic.virtual_clusters["b"].virtual_cells[0].number == 4
