"""The portal names device kinds: a cluster of NVIDIA GPUs and NPUs counts in devices, and each
node of a kind other than NVIDIA's GPUs shows how many it has of which kind."""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from portal_client import Visitor

from server.harness import serve_platform, server_settings

CLUSTER = textwrap.dedent(
    """\
    physicalCluster:
      skuTypes:
        A100: {gpu: 1, cpu: 1, memory: 256Mi}
        NPU: {gpu: 1, cpu: 1, memory: 256Mi, device: acc.example/npu}
      cellTypes:
        A100-NODE: {childCellType: A100, childCellNumber: 2, isNodeLevel: true}
        NPU-NODE: {childCellType: NPU, childCellNumber: 4, isNodeLevel: true}
      physicalCells:
        - {cellType: A100-NODE, cellAddress: nvidia-node}
        - {cellType: NPU-NODE, cellAddress: npu-node}
    virtualClusters:
      default:
        virtualCells:
          - {cellType: A100-NODE, cellNumber: 1}
          - {cellType: NPU-NODE, cellNumber: 1}
    """
)


@pytest.fixture(scope="module")
def visitor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Visitor]:
    home = tmp_path_factory.mktemp("device-kinds-portal")
    cluster = Path(home) / "mixed.yaml"
    cluster.write_text(CLUSTER)
    with serve_platform(server_settings(home / "pai"), cluster) as server:
        yield Visitor(server, server.admin)


def text_of(visitor: Visitor, path: str) -> str:
    page = visitor.client.get(path)
    assert page.status_code == 200, page.text
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def test_the_cluster_page_names_a_nodes_kind_beside_its_sku(visitor: Visitor) -> None:
    text = text_of(visitor, "/cluster")

    assert "NPU (4 x acc.example/npu)" in text
    assert "A100 (" not in text  # NVIDIA's GPUs are GPUs, as ever


def test_a_cluster_of_several_kinds_counts_in_devices(visitor: Visitor) -> None:
    text = text_of(visitor, "/")

    assert "devices free of 6" in text
