"""RDMA for jobs of several tasks: on a node the cluster file marks `rdma: true`, the tasks of
such jobs are placed with the node's RDMA devices; a job of one task, or a node without RDMA,
gets none."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_controller import job, running_platform

from pai.cluster import ClusterConfigError, cluster_from_yaml

CLUSTER = textwrap.dedent(
    """\
    physicalCluster:
      skuTypes:
        CPU: {gpu: 0, cpu: 1, memory: 256Mi}
      cellTypes:
        CPU-NODE: {childCellType: CPU, childCellNumber: 2, isNodeLevel: true}
      physicalCells:
        - {cellType: CPU-NODE, cellAddress: ib1, rdma: true}
        - {cellType: CPU-NODE, cellAddress: ib2, rdma: true}
        - {cellType: CPU-NODE, cellAddress: plain}
    virtualClusters:
      default: {virtualCells: [{cellType: CPU-NODE, cellNumber: 3}]}
    """
)


def test_the_cluster_file_marks_rdma_nodes_and_refuses_anything_but_a_boolean() -> None:
    assert cluster_from_yaml(CLUSTER).rdma_nodes == {"ib1", "ib2"}

    bad = CLUSTER.replace("cellAddress: ib1, rdma: true", "cellAddress: ib1, rdma: yes-please")
    with pytest.raises(ClusterConfigError) as raised:
        cluster_from_yaml(bad)

    (problem,) = raised.value.problems
    assert problem.startswith("physicalCluster.physicalCells[0].rdma (line 7)")
    assert "must be true or false, got 'yes-please'" in problem


def test_only_tasks_of_jobs_of_several_tasks_on_rdma_nodes_get_rdma(tmp_path: Path) -> None:
    with running_platform(tmp_path, cluster_from_yaml(CLUSTER)) as platform:
        four = job("four", ["true"]).replace("  main:\n", "  main:\n    instances: 4\n")
        several = platform.submit(four)
        single = platform.submit(job("single", ["true"]))
        platform.wait(several)
        platform.wait(single)

        def placements(name: str) -> list[dict[str, object]]:
            return [t["attempts"][-1]["placement"] for t in platform.tasks(name).values()]

        given = [(where["node"], bool(where.get("rdma"))) for where in placements(several)]
        # Four tasks on nodes of two slots: at least one RDMA node holds some of them.
        assert any(rdma for _, rdma in given)
        assert all(rdma == (node != "plain") for node, rdma in given)
        assert not any(where.get("rdma") for where in placements(single))
