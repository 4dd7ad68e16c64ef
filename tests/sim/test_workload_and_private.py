"""How trace jobs become gangs, and the private clusters that define the sharing anomaly."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_helpers import trace

from pai.cluster import cluster_from_file, load_cluster
from pai.scheduler.admission import CapacityIndex
from pai.sim.clusters import make_cluster
from pai.sim.private import private_cluster
from pai.sim.workload import ClusterMismatchError, largest_pods, pod_sizes, scale_load

EXAMPLE_CLUSTER = Path(__file__).parents[2] / "examples" / "clusters" / "two-racks.yaml"


@pytest.mark.parametrize(
    ("gpus", "largest", "pods"),
    [
        (1, 8, (1,)),
        (8, 8, (8,)),
        (16, 8, (8, 8)),
        (12, 8, (6, 6)),
        (20, 8, (5, 5, 5, 5)),  # 3 equal pods cannot make 20
        (48, 8, (8,) * 6),
        (7, 2, (1,) * 7),
        (6, 4, (3, 3)),
    ],
)
def test_a_job_becomes_the_fewest_equal_pods_that_fit_a_node(
    gpus: int, largest: int, pods: tuple[int, ...]
) -> None:
    assert pod_sizes(gpus, largest) == pods


def test_largest_pod_follows_the_vcs_cells() -> None:
    cluster = cluster_from_file(EXAMPLE_CLUSTER)

    # vision and nlp own nodes (a rack), speech only 4-GPU sockets.
    assert largest_pods(cluster, ["vision", "nlp", "speech"]) == {
        "nlp": 8,
        "speech": 4,
        "vision": 8,
    }
    with pytest.raises(ClusterMismatchError, match="no VC named audio"):
        largest_pods(cluster, ["audio"])


def test_leaf_cells_of_several_gpus_cannot_be_replayed() -> None:
    data = make_cluster(1, 8, None, {"a": 1})
    data["physicalCluster"]["skuTypes"]["GPU"]["gpu"] = 2

    with pytest.raises(ClusterMismatchError, match="2 GPUs"):
        largest_pods(load_cluster(data), ["a"])


def test_private_clusters_give_each_vc_exactly_its_cells_and_nothing_shared() -> None:
    shared = cluster_from_file(EXAMPLE_CLUSTER)
    private = load_cluster(private_cluster(shared))

    shared_capacity = CapacityIndex(shared)
    private_capacity = CapacityIndex(private)
    for vc, chain in (("nlp", "V100-RACK@nlp"), ("speech", "V100-SOCKET-machine@speech")):
        [want] = shared_capacity.vcs[vc].values()
        [(private_chain, got)] = private_capacity.vcs[vc].items()
        assert (got.leaves, got.largest_node) == (want.leaves, want.largest_node)
        assert private_chain == chain
    # vision's pinned node is left out: trace jobs never ask for pinned cells.
    assert private_capacity.vcs["vision"]["V100-NODE@vision"].leaves == 16

    nodes_by_vc: dict[str, int] = {}
    for node in private.nodes:
        vc = node.name.rsplit("-n", 1)[0]
        nodes_by_vc[vc] = nodes_by_vc.get(vc, 0) + len(node.leaf_indices)
    assert nodes_by_vc == {"vision": 16, "nlp": 32, "speech": 8}
    # A socket VC gets machines of one socket each.
    speech_nodes = [node for node in private.nodes if node.name.startswith("speech-")]
    assert [len(node.leaf_indices) for node in speech_nodes] == [4, 4]
    chains = {node.chain for node in private.nodes}
    assert len(chains) == 3  # one per VC: no hardware in common


def test_private_cluster_of_chosen_vcs_only() -> None:
    shared = cluster_from_file(EXAMPLE_CLUSTER)
    private = load_cluster(private_cluster(shared, ["speech"]))

    assert list(private.virtual_clusters) == ["speech"]
    with pytest.raises(ValueError, match="no VC named audio"):
        private_cluster(shared, ["audio"])


def test_scaling_the_load_compresses_arrivals_but_not_run_times() -> None:
    jobs = trace(("x", "a", 100, 1, 50), ("y", "a", 140, 2, 60), ("z", "a", 300, 1, 70))

    faster = scale_load(jobs, 2)

    assert [job.submit_time_s for job in faster] == [100, 120, 200]
    assert [job.duration_s for job in faster] == [50, 60, 70]
    assert "2x as fast" in faster.metadata["assumptions"][-1]
    assert scale_load(jobs, 1) is jobs
    with pytest.raises(ValueError, match="> 0"):
        scale_load(jobs, 0)
