"""Loading and validating cluster files: defaults filled in, and every problem named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pai.cluster import ClusterConfigError, cluster_from_file, cluster_from_yaml, load_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clusters"


def small_cluster(**overrides: object) -> dict[str, object]:
    """Two racks of two 4-GPU nodes; overrides replace top-level sections."""
    data: dict[str, object] = {
        "skuTypes": {"K80": {"gpu": 1, "cpu": 4, "memory": "16Gi"}},
        "cellTypes": {
            "K80-NODE": {"childCellType": "K80", "childCellNumber": 4, "isNodeLevel": True},
            "K80-RACK": {"childCellType": "K80-NODE", "childCellNumber": 2},
        },
        "physicalCells": [
            {
                "cellType": "K80-RACK",
                "cellChildren": [{"cellAddress": "a0"}, {"cellAddress": "a1"}],
            },
            {
                "cellType": "K80-RACK",
                "cellChildren": [{"cellAddress": "b0"}, {"cellAddress": "b1"}],
            },
        ],
        "virtualClusters": {
            "alpha": {"virtualCells": [{"cellType": "K80-RACK", "cellNumber": 1}]},
            "beta": {"virtualCells": [{"cellType": "K80-RACK.K80-NODE", "cellNumber": 2}]},
        },
    }
    data.update(overrides)
    return data


def problems_of(data: dict[str, object]) -> list[str]:
    with pytest.raises(ClusterConfigError) as caught:
        load_cluster(data)
    return caught.value.problems


def test_worked_example_loads_with_hived_addresses_and_loopback_nodes() -> None:
    cluster = cluster_from_file(EXAMPLES / "two-racks.yaml")
    chain = cluster.chains["V100-RACK"]
    assert chain.types == ("V100", "V100-PCIE", "V100-SOCKET", "V100-NODE", "V100-RACK")
    assert chain.node_level == 4
    assert [node.name for node in cluster.nodes][:2] == ["r0-n0", "r0-n1"]
    assert [node.address for node in cluster.nodes] == [f"127.0.0.{i}" for i in range(1, 9)]
    assert cluster.nodes[0].leaf_indices == tuple(range(8))
    last_leaf = list(cluster.physical_cells[0].children[2].leaves())[-1]
    assert last_leaf.address == "0/r0-n2/1/3/7"
    assert last_leaf.leaf_index == 7
    assert cluster.sku_types["V100"].memory_mb == 60 * 1024
    assert cluster.virtual_clusters["vision"].pinned_cells == ("vision-pinned-node",)
    assert cluster.pinned_cells["vision-pinned-node"].node_name == "r1-n3"


def test_local_four_node_example_is_cpu_only_on_loopback() -> None:
    cluster = cluster_from_file(EXAMPLES / "local-4node.yaml")
    assert [(node.name, node.address) for node in cluster.nodes] == [
        ("node1", "127.0.0.1"),
        ("node2", "127.0.0.2"),
        ("node3", "127.0.0.3"),
        ("node4", "127.0.0.4"),
    ]
    sku = cluster.sku_types["CPU"]
    assert (sku.gpu, sku.cpu, sku.memory_mb) == (0, 1, 1024)
    assert set(cluster.virtual_clusters) == {"default", "research"}


def test_sections_may_sit_under_physical_cluster_or_at_the_top() -> None:
    flat = small_cluster()
    nested = {
        "physicalCluster": {key: flat[key] for key in ("skuTypes", "cellTypes", "physicalCells")},
        "virtualClusters": flat["virtualClusters"],
        "webServerAddress": ":9096",
    }
    assert load_cluster(nested) == load_cluster(flat)


def test_explicit_node_addresses_and_leaf_indices() -> None:
    cells = [
        {
            "cellType": "K80-RACK",
            "cellChildren": [
                {
                    "cellAddress": "a0",
                    "nodeAddress": "10.1.0.1",
                    "cellChildren": [{"cellAddress": 7}, {"cellAddress": 6}],
                },
                {"cellAddress": "a1", "address": "10.1.0.2"},
            ],
        },
        {
            "cellType": "K80-RACK",
            "cellChildren": [
                {"cellAddress": "b0", "nodeAddress": "10.1.1.1"},
                {"cellAddress": "b1", "nodeAddress": "10.1.1.2"},
            ],
        },
    ]
    cluster = load_cluster(small_cluster(physicalCells=cells))
    assert [(node.name, node.address) for node in cluster.nodes] == [
        ("a0", "10.1.0.1"),
        ("a1", "10.1.0.2"),
        ("b0", "10.1.1.1"),
        ("b1", "10.1.1.2"),
    ]
    assert cluster.nodes[0].leaf_indices == (7, 6, 2, 3)


def test_repeated_leaf_index_is_rejected() -> None:
    cells = [
        {
            "cellType": "K80-RACK",
            "cellChildren": [
                {"cellAddress": "a0", "cellChildren": [{"cellAddress": 1}]},
                {"cellAddress": "a1"},
            ],
        }
    ]
    problems = problems_of(small_cluster(physicalCells=cells, virtualClusters={}))
    assert any("leaf index 1 repeats in 'a0'" in problem for problem in problems)


def test_many_nodes_continue_through_the_loopback_range() -> None:
    data = {
        "skuTypes": {"CPU": {"cpu": 1, "memory": 512}},
        "cellTypes": {"N": {"childCellType": "CPU", "childCellNumber": 1, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "N", "cellAddress": f"n{i}"} for i in range(300)],
    }
    cluster = load_cluster(data)
    assert cluster.nodes[0].address == "127.0.0.1"
    assert cluster.nodes[254].address == "127.0.0.255"
    assert cluster.nodes[299].address == "127.0.1.44"


def test_infeasible_vc_split_names_the_chain_and_the_level() -> None:
    vcs = {
        "alpha": {"virtualCells": [{"cellType": "K80-RACK", "cellNumber": 1}]},
        "beta": {"virtualCells": [{"cellType": "K80-RACK.K80-NODE", "cellNumber": 3}]},
    }
    (problem,) = problems_of(small_cluster(virtualClusters=vcs))
    assert "chain 'K80-RACK'" in problem
    assert "'K80-NODE' (level 2)" in problem
    assert "VCs ask for 3 ('beta' 3) but only 2 are left" in problem


def test_feasibility_counts_what_pinned_cells_split() -> None:
    """Two pinned nodes in different racks leave no whole rack, although counts alone would."""
    cells = [
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "a0", "pinnedCellId": "p1"}]},
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "b0", "pinnedCellId": "p2"}]},
    ]
    cells[0]["cellChildren"].append({"cellAddress": "a1"})  # type: ignore[attr-defined]
    cells[1]["cellChildren"].append({"cellAddress": "b1"})  # type: ignore[attr-defined]
    vcs = {
        "alpha": {"virtualCells": [{"cellType": "K80-RACK", "cellNumber": 1}]},
        "beta": {"pinnedCells": [{"pinnedCellId": "p1"}, {"pinnedCellId": "p2"}]},
    }
    (problem,) = problems_of(small_cluster(physicalCells=cells, virtualClusters=vcs))
    assert "'K80-RACK' (level 3): VCs ask for 1 ('alpha' 1) but only 0 are left" in problem


def test_unknown_cell_type_and_cycle_are_reported_together() -> None:
    types = {
        "K80-NODE": {"childCellType": "K08", "childCellNumber": 4, "isNodeLevel": True},
        "LOOP-A": {"childCellType": "LOOP-B", "childCellNumber": 2},
        "LOOP-B": {"childCellType": "LOOP-A", "childCellNumber": 2},
        "K80-RACK": {"childCellType": "K80-NODE", "childCellNumber": 2},
    }
    problems = problems_of(small_cluster(cellTypes=types, virtualClusters={}))
    text = "\n".join(problems)
    assert "unknown cell type 'K08': it is neither in cellTypes nor in skuTypes" in text
    assert "cell types form a cycle: LOOP-A -> LOOP-B -> LOOP-A" in text


def test_node_without_name_and_mixed_node_addresses() -> None:
    cells = [
        {
            "cellType": "K80-RACK",
            "cellChildren": [{}, {"cellAddress": "a1", "nodeAddress": "10.0.0.2"}],
        },
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "b0"}, {"cellAddress": "b1"}]},
    ]
    problems = problems_of(small_cluster(physicalCells=cells, virtualClusters={}))
    text = "\n".join(problems)
    assert "physicalCells[0].cellChildren[0]: node-level cell (K80-NODE) needs cellAddress" in text
    assert "either every node sets nodeAddress or none does" in text
    assert "missing on: b0, b1" in text


def test_duplicate_and_unknown_pinned_cells() -> None:
    cells = [
        {
            "cellType": "K80-RACK",
            "cellChildren": [{"cellAddress": "a0", "pinnedCellId": "p"}, {"cellAddress": "a1"}],
        },
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "b0"}, {"cellAddress": "b1"}]},
    ]
    vcs = {
        "alpha": {"pinnedCells": [{"pinnedCellId": "p"}]},
        "beta": {"pinnedCells": [{"pinnedCellId": "p"}, {"pinnedCellId": "ghost"}]},
    }
    problems = problems_of(small_cluster(physicalCells=cells, virtualClusters=vcs))
    text = "\n".join(problems)
    assert "VC 'beta': pinned cell 'p' already belongs to VC 'alpha'" in text
    assert "VC 'beta': unknown pinnedCellId 'ghost' (pinned cells: p)" in text


def test_bad_virtual_cell_path_and_vc_name() -> None:
    vcs = {
        "bad-name": {"virtualCells": [{"cellType": "K80-RACK.K80", "cellNumber": 1}]},
        "gamma": {"virtualCells": [{"cellType": "K80-NODE", "cellNumber": 1}]},
    }
    text = "\n".join(problems_of(small_cluster(virtualClusters=vcs)))
    assert "VC name 'bad-name' may only use letters, digits and _" in text
    assert (
        "'K80-RACK.K80' is not a path of chain 'K80-RACK'; the child of 'K80-RACK' is 'K80-NODE'"
        in text
    )
    assert (
        "VC 'gamma': 'K80-NODE' is not the type of a top-level physical cell (chains: K80-RACK)"
        in text
    )


def test_yaml_errors_point_at_lines() -> None:
    text = textwrap.dedent(
        """\
        skuTypes:
          K80: {gpu: 1, cpu: 4, memory: lots}
        cellTypes:
          K80-NODE: {childCellType: K80, childCellNumber: 0, isNodeLevel: true}
        physicalCells:
        - cellType: K80-NODE
          cellAddress: n0
        """
    )
    with pytest.raises(ClusterConfigError) as caught:
        cluster_from_yaml(text, source="cluster.yaml")
    message = str(caught.value)
    assert "cluster.yaml is invalid (2 problem(s))" in message
    assert "skuTypes.K80.memory (line 2): expected an int (MB) or a quantity like 60Gi" in message
    assert "cellTypes.K80-NODE.childCellNumber (line 4): must be >= 1, got 0" in message


def test_duplicate_node_names_and_unknown_keys() -> None:
    cells = [
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "a0"}, {"cellAddress": "a0"}]},
        {"cellType": "K80-RACK", "cellChildren": [{"cellAddress": "b0", "gpus": 4}]},
    ]
    text = "\n".join(problems_of(small_cluster(physicalCells=cells, virtualClusters={})))
    assert "node 'a0' is also defined at physicalCells[0].cellChildren[0]" in text
    assert "physicalCells[1].cellChildren[0].gpus: unknown key" in text


def test_not_yaml_at_all() -> None:
    with pytest.raises(ClusterConfigError, match="not valid YAML"):
        cluster_from_yaml("skuTypes: [unclosed")


def test_the_grace_period_of_stopped_tasks_defaults_to_ten_seconds_and_is_checked() -> None:
    assert load_cluster(small_cluster()).stop_grace_seconds == 10
    assert load_cluster(small_cluster(podGracefulDeletionTimeoutSec=60)).stop_grace_seconds == 60
    text = (EXAMPLES / "local-4node.yaml").read_text() + "podGracefulDeletionTimeoutSec: -1\n"
    with pytest.raises(ClusterConfigError) as caught:
        cluster_from_yaml(text, source="cluster.yaml")
    line = text.count("\n")
    assert f"podGracefulDeletionTimeoutSec (line {line}): must be >= 0, got -1" in str(caught.value)


def test_a_vcs_user_limit_is_read_and_defaults_to_none() -> None:
    vcs = {
        "alpha": {
            "virtualCells": [{"cellType": "K80-RACK", "cellNumber": 1}],
            "userLimit": {"gpus": 6, "cpus": 12.5, "jobs": 2},
        },
        "beta": {
            "virtualCells": [{"cellType": "K80-RACK.K80-NODE", "cellNumber": 2}],
            "userLimit": {"jobs": 0},
        },
    }
    config = load_cluster(small_cluster(virtualClusters=vcs))
    alpha, beta = config.virtual_clusters["alpha"], config.virtual_clusters["beta"]
    assert (alpha.user_limit.gpus, alpha.user_limit.cpus, alpha.user_limit.jobs) == (6, 12.5, 2)
    assert (beta.user_limit.gpus, beta.user_limit.cpus, beta.user_limit.jobs) == (None, None, 0)
    assert load_cluster(small_cluster()).virtual_clusters["alpha"].user_limit.unlimited


def test_a_bad_user_limit_names_each_field() -> None:
    vcs = {
        "alpha": {
            "virtualCells": [{"cellType": "K80-RACK", "cellNumber": 1}],
            "userLimit": {"gpus": -1, "cpus": "many", "jobs": 1.5, "memory": 3},
        },
        "beta": {
            "virtualCells": [{"cellType": "K80-RACK.K80-NODE", "cellNumber": 2}],
            "userLimit": [4],
        },
    }
    text = "\n".join(problems_of(small_cluster(virtualClusters=vcs)))
    assert (
        "virtualClusters.alpha.userLimit.gpus" in text and "must be a number >= 0, got -1" in text
    )
    assert "must be a number >= 0, got 'many'" in text
    assert "virtualClusters.alpha.userLimit.jobs" in text and "integer >= 0, got 1.5" in text
    assert "virtualClusters.alpha.userLimit.memory: unknown key" in text
    assert "virtualClusters.beta.userLimit" in text and "must be a mapping with gpus" in text


def test_a_sku_names_its_device_kind_and_nvidia_gpus_are_the_default() -> None:
    skus = {
        "K80": {"gpu": 1, "cpu": 4, "memory": "16Gi"},
        "NPU": {"gpu": 2, "cpu": 4, "memory": "16Gi", "device": "acc.example/npu"},
    }
    cells = {
        "K80-NODE": {"childCellType": "K80", "childCellNumber": 2, "isNodeLevel": True},
        "NPU-NODE": {"childCellType": "NPU", "childCellNumber": 2, "isNodeLevel": True},
    }
    config = load_cluster(
        {
            "skuTypes": skus,
            "cellTypes": cells,
            "physicalCells": [
                {"cellType": "K80-NODE", "cellAddress": "g0"},
                {"cellType": "NPU-NODE", "cellAddress": "n0"},
            ],
            "virtualClusters": {
                "mixed": {
                    "virtualCells": [
                        {"cellType": "K80-NODE", "cellNumber": 1},
                        {"cellType": "NPU-NODE", "cellNumber": 1},
                    ]
                }
            },
        }
    )

    assert config.sku_types["K80"].device == "nvidia.com/gpu"
    assert config.sku_types["K80"].unit_noun == "GPUs"
    assert config.sku_types["NPU"].device == "acc.example/npu"
    assert config.sku_types["NPU"].unit_noun == "acc.example/npu"


@pytest.mark.parametrize(
    ("device", "gpu", "says"),
    [
        ("npu", 1, "must be a CDI device kind VENDOR/CLASS"),
        ("acc.example/n p u", 1, "must be a CDI device kind"),
        (7, 1, "got 7"),
        ("amd.com/gpu", 0, "only a SKU with devices"),
    ],
)
def test_a_bad_device_kind_is_named_with_its_path(device: object, gpu: int, says: str) -> None:
    data = small_cluster(
        skuTypes={"K80": {"gpu": gpu, "cpu": 4, "memory": "16Gi", "device": device}}
    )

    with pytest.raises(ClusterConfigError) as raised:
        load_cluster(data)

    problems = [p for p in raised.value.problems if "skuTypes.K80.device" in p]
    assert len(problems) == 1 and says in problems[0]
