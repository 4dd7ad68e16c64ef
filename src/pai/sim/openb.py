"""Alibaba's GPU-sharing trace `cluster-trace-gpu-v2023` ("openb"): its pods, its nodes, and the
cluster file PAI replays them on.

- A pod list (`openb_pod_list_*.csv[.gz]`) gives each pod's CPU (thousandths of a core), memory
  (MiB, read as MB), whole GPUs (`num_gpu`) and, for a one-GPU pod, the thousandths of that GPU
  it takes (`gpu_milli`; 1000 is the whole GPU). A pod asking for specific GPU models
  (`gpu_spec`) is refused: no published pod list has one.
- The node list (`openb_node_list_gpu_node.csv[.gz]`, 1,213 nodes, 6,212 GPUs) gives each node's
  CPU, memory, GPUs and GPU model.

`openb_cluster` turns the node list into a HiveD cluster file: one chain per node shape (model,
GPUs, CPU, memory), a leaf cell per GPU with its equal share of the node's CPU and memory (a
node whose CPU does not split evenly loses the remainder: one node, 2 of its 82 CPUs). `vcs`
chooses who owns the cells: `one` VC `default` owning every node, or `models`, a VC per GPU
model owning that model's nodes.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pai.scheduler.types import GPU_MILLI, GpuShare, GroupRequest, PodRequest

NODE_LIST = "openb_node_list_gpu_node.csv.gz"
"""The node list's name, looked for beside a pod list."""
DEFAULT_VC = "default"
VC_LAYOUTS = ("one", "models")
ROLE = "pod"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


class OpenbFormatError(ValueError):
    """A pod or node list that cannot be read as the trace's format (file and line named)."""


@dataclass(frozen=True)
class OpenbPod:
    name: str
    cpu_milli: int
    memory_mb: int
    gpus: int
    gpu_milli: int

    @property
    def gpu_demand(self) -> float:
        """GPUs it asks for, a share counted as its fraction."""
        return self.gpus * self.gpu_milli / GPU_MILLI

    def request(self, name: str, vc: str, priority: int) -> GroupRequest:
        """The pod as PAI schedules it: a task sharing one GPU (a whole one, part of one, or
        none, for a CPU-only pod, which then shares a GPU's CPU and memory only), or, asking
        for several GPUs, a whole-cell task."""
        if self.gpus > 1:
            pod = PodRequest(ROLE, 0, self.gpus, None, self.cpu_milli, self.memory_mb)
        else:
            share = GpuShare(self.gpu_milli if self.gpus else 0)
            pod = PodRequest(ROLE, 0, 1, share, self.cpu_milli, self.memory_mb)
        return GroupRequest(name, vc, priority, (pod,))


@dataclass(frozen=True)
class OpenbNode:
    name: str
    cpu_milli: int
    memory_mb: int
    gpus: int
    model: str

    @property
    def shape(self) -> str:
        """The node's cell type: model, GPUs, CPUs and GiB of memory."""
        return f"{self.model}-{self.gpus}gpu-{self.cpu_milli // 1000}cpu-{self.memory_mb // 1024}gb"


def _rows(path: Path, columns: Iterable[str]) -> Iterable[tuple[int, dict[str, str]]]:
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    reader = csv.DictReader(io.StringIO(text))
    missing = [column for column in columns if column not in (reader.fieldnames or ())]
    if missing:
        raise OpenbFormatError(f"{path}: missing column(s) {', '.join(missing)}")
    yield from enumerate(reader, start=2)


def _int(path: Path, line: int, row: dict[str, str], column: str, minimum: int = 0) -> int:
    text = row.get(column) or ""
    try:
        value = int(text)
    except ValueError:
        raise OpenbFormatError(
            f"{path}:{line}: {column} must be an integer, got {text!r}"
        ) from None
    if value < minimum:
        raise OpenbFormatError(f"{path}:{line}: {column} must be >= {minimum}, got {value}")
    return value


def read_pods(path: str | Path) -> tuple[OpenbPod, ...]:
    """The pods of a pod list, in file order."""
    source = Path(path)
    pods = []
    for line, row in _rows(source, POD_COLUMNS):
        if row.get("gpu_spec"):
            raise OpenbFormatError(
                f"{source}:{line}: pod {row['name']} asks for GPU models {row['gpu_spec']!r}; "
                "model constraints are not replayed"
            )
        gpus = _int(source, line, row, "num_gpu")
        milli = _int(source, line, row, "gpu_milli")
        if milli > GPU_MILLI or (gpus > 1 and milli != GPU_MILLI) or (gpus and not milli):
            raise OpenbFormatError(
                f"{source}:{line}: gpu_milli {milli} does not go with num_gpu {gpus} "
                "(a share of one GPU is 1..1000 thousandths; several GPUs are whole)"
            )
        pods.append(
            OpenbPod(
                row["name"],
                _int(source, line, row, "cpu_milli"),
                _int(source, line, row, "memory_mib"),
                gpus,
                milli if gpus else 0,
            )
        )
    if not pods:
        raise OpenbFormatError(f"{source}: no pods")
    return tuple(pods)


def read_nodes(path: str | Path) -> tuple[OpenbNode, ...]:
    source = Path(path)
    nodes = [
        OpenbNode(
            row["sn"],
            _int(source, line, row, "cpu_milli", 1),
            _int(source, line, row, "memory_mib", 1),
            _int(source, line, row, "gpu", 1),
            row["model"] or "GPU",
        )
        for line, row in _rows(source, NODE_COLUMNS)
    ]
    if not nodes:
        raise OpenbFormatError(f"{source}: no nodes")
    return tuple(nodes)


def node_list_beside(pod_list: str | Path) -> Path:
    """The node list in the pod list's folder (the trace ships them together)."""
    folder = Path(pod_list).parent
    for name in (NODE_LIST, NODE_LIST.removesuffix(".gz")):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no {NODE_LIST} beside {pod_list}; give the node list's path")


def openb_cluster(nodes: Iterable[OpenbNode], vcs: str = "one") -> dict[str, Any]:
    """The cluster file of `nodes` (see the module docstring), as plain data."""
    if vcs not in VC_LAYOUTS:
        raise ValueError(f"unknown VC layout {vcs!r}; layouts: {', '.join(VC_LAYOUTS)}")
    skus: dict[str, dict[str, Any]] = {}
    cell_types: dict[str, dict[str, Any]] = {}
    physical: list[dict[str, Any]] = []
    owned: dict[str, dict[str, int]] = {}
    for node in nodes:
        shape = node.shape
        if shape not in cell_types:
            sku = f"{shape}-gpu"
            skus[sku] = {
                "gpu": 1,
                "cpu": node.cpu_milli // 1000 // node.gpus,
                "memory": f"{node.memory_mb // node.gpus}Mi",
            }
            cell_types[shape] = {
                "childCellType": sku,
                "childCellNumber": node.gpus,
                "isNodeLevel": True,
            }
        physical.append({"cellType": shape, "cellAddress": node.name})
        vc = DEFAULT_VC if vcs == "one" else vc_name(node.model)
        cells = owned.setdefault(vc, {})
        cells[shape] = cells.get(shape, 0) + 1
    return {
        "physicalCluster": {"skuTypes": skus, "cellTypes": cell_types, "physicalCells": physical},
        "virtualClusters": {
            vc: {
                "virtualCells": [
                    {"cellType": shape, "cellNumber": count} for shape, count in cells.items()
                ]
            }
            for vc, cells in owned.items()
        },
    }


def vc_name(model: str) -> str:
    """A VC name (letters, digits and '_') for a GPU model."""
    return "".join(char if char.isalnum() else "_" for char in model)
