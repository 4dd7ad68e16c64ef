"""Read a cluster file in HiveD's format, fill in defaults and collect every problem at once.

Accepted layout (HiveD's, plus `skuTypes` and node addresses):

    skuTypes: {<sku>: {gpu, cpu, memory, gpuMemory, device}}  # device: a CDI kind, e.g. amd.com/gpu

    physicalCluster: {skuTypes, cellTypes, physicalCells}   # or these three keys at the top level
    virtualClusters: {<vc>: {virtualCells: [...], pinnedCells: [...], userLimit: {...}}}
    podGracefulDeletionTimeoutSec: 10     # optional, OpenPAI's name: SIGTERM to SIGKILL, seconds

Defaults, written down here because the scheduler and the executors rely on them:
- a top-level cell without `cellAddress` gets its index in `physicalCells`; a child's full address
  is `<parent address>/<own address>`;
- leaves under a node are numbered 0..n-1 in file order unless a leaf gives an integer
  `cellAddress` (that number is the GPU index handed to the task);
- a node-level cell may say `rdma: true`: the node has InfiniBand/RoCE devices that the tasks of
  jobs of several tasks get (`pai.executors.isolation.runtime.rdma_arguments`);
- a node-level cell's `cellAddress` is the node's name (required, unique); its `nodeAddress` (or
  `address`) is where tasks on it are reached. Either every node sets one or none does: then node
  number i (0-based, file order) gets the i+1-th loopback address (127.0.0.1, 127.0.0.2, ...), so
  several "nodes" can share one machine.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path as FilePath

import yaml

from pai.cluster.devices import DEFAULT_DEVICE_KIND, kind_problem
from pai.cluster.model import (
    DEFAULT_STOP_GRACE_SECONDS,
    CellType,
    Chain,
    ClusterConfig,
    ClusterConfigError,
    NodeSpec,
    PhysicalCellSpec,
    SkuType,
    UserLimit,
    VirtualCellSpec,
    VirtualClusterSpec,
)
from pai.cluster.quantity import memory_mb
from pai.cluster.yamlsource import Located, Path, load_located, locate_mapping

SECTION_KEYS = ("skuTypes", "cellTypes", "physicalCells")
# HiveD keys that only concern its Kubernetes deployment; accepted so HiveD files load unchanged.
HIVED_DEPLOYMENT_KEYS = frozenset(
    {
        "webServerAddress",
        "waitingPodSchedulingBlockMilliSec",
        "kubeApiServerAddress",
        "kubeConfigFilePath",
        "forcePodBindThreshold",
    }
)
GRACE_KEY = "podGracefulDeletionTimeoutSec"
VC_NAME = re.compile(r"^[A-Za-z0-9_]+$")
FIRST_LOOPBACK = int(ipaddress.IPv4Address("127.0.0.1"))


def cluster_from_file(path: str | FilePath) -> ClusterConfig:
    """Load and validate a cluster file; `ClusterConfigError` names every problem and its line."""
    file_path = FilePath(path)
    return cluster_from_yaml(file_path.read_text(encoding="utf-8"), source=str(file_path))


def cluster_from_yaml(text: str, source: str = "cluster file") -> ClusterConfig:
    try:
        located = load_located(text)
    except yaml.YAMLError as exc:
        raise ClusterConfigError([f"not valid YAML: {exc}"], source) from exc
    return _Builder(located, source).build()


def load_cluster(data: Mapping[str, object], source: str = "cluster description") -> ClusterConfig:
    """Validate a cluster given as plain data (what `yaml.safe_load` of a cluster file returns)."""
    return _Builder(locate_mapping(data), source).build()


@dataclass
class _RawCell:
    """A physical cell while it is being built (node addresses are assigned at the end)."""

    cell_type: str
    level: int
    address: str
    pinned_cell_id: str | None
    path: Path
    children: list[_RawCell] = field(default_factory=list)
    node_name: str | None = None
    node_address: str | None = None
    leaf_index: int | None = None

    def freeze(self, node_addresses: Mapping[str, str]) -> PhysicalCellSpec:
        return PhysicalCellSpec(
            cell_type=self.cell_type,
            level=self.level,
            address=self.address,
            pinned_cell_id=self.pinned_cell_id,
            children=tuple(child.freeze(node_addresses) for child in self.children),
            node_name=self.node_name,
            node_address=node_addresses.get(self.node_name) if self.node_name else None,
            leaf_index=self.leaf_index,
        )

    def leaves(self) -> list[_RawCell]:
        if not self.children:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]


class _Builder:
    def __init__(self, located: Located, source: str) -> None:
        self.located = located
        self.source = source
        self.problems: list[str] = []
        self.sku_types: dict[str, SkuType] = {}
        self.cell_types: dict[str, CellType] = {}
        self.chains: dict[str, Chain] = {}
        self.tops: list[_RawCell] = []
        self.pinned: dict[str, Path] = {}
        self.declared_cell_types: set[str] = set()
        self._rdma_nodes: set[str] = set()

    def problem(self, path: Path, message: str) -> None:
        self.problems.append(f"{self.located.where(path)}: {message}")

    def build(self) -> ClusterConfig:
        root = self.located.data
        if not isinstance(root, Mapping):
            raise ClusterConfigError(["the cluster file must be a mapping"], self.source)
        sections = self._sections(root)
        self.sku_types = self._sku_types(*sections["skuTypes"])
        self.cell_types = self._cell_types(*sections["cellTypes"])
        self._check_type_graph(sections["cellTypes"][1])
        self.tops = self._physical_cells(*sections["physicalCells"])
        node_addresses = self._node_addresses()
        virtual_clusters = self._virtual_clusters(root.get("virtualClusters"), ("virtualClusters",))
        self._check_feasibility(virtual_clusters)
        grace = self._count(root.get(GRACE_KEY, DEFAULT_STOP_GRACE_SECONDS), (GRACE_KEY,), 0)
        if self.problems:
            raise ClusterConfigError(self.problems, self.source)
        physical_cells = tuple(top.freeze(node_addresses) for top in self.tops)
        nodes = tuple(
            NodeSpec(
                name=cell.node_name,
                address=node_addresses[cell.node_name],
                chain=top.cell_type,
                sku_type=self.chains[top.cell_type].sku_type,
                rdma=cell.node_name in self._rdma_nodes,
                leaf_indices=tuple(
                    leaf.leaf_index for leaf in cell.leaves() if leaf.leaf_index is not None
                ),
            )
            for top in physical_cells
            for cell in top.walk()
            if cell.node_name is not None
        )
        pinned = {
            cell.pinned_cell_id: cell
            for top in physical_cells
            for cell in top.walk()
            if cell.pinned_cell_id is not None
        }
        return ClusterConfig(
            sku_types=self.sku_types,
            cell_types=self.cell_types,
            chains=self.chains,
            physical_cells=physical_cells,
            virtual_clusters=virtual_clusters,
            nodes=nodes,
            pinned_cells=pinned,
            stop_grace_seconds=DEFAULT_STOP_GRACE_SECONDS if grace is None else grace,
        )

    # -- sections -------------------------------------------------------------------------------

    def _sections(self, root: Mapping[str, object]) -> dict[str, tuple[object, Path]]:
        allowed = {
            "physicalCluster",
            "virtualClusters",
            GRACE_KEY,
            *SECTION_KEYS,
            *HIVED_DEPLOYMENT_KEYS,
        }
        for key in root:
            if key not in allowed:
                self.problem(
                    (str(key),),
                    "unknown key; expected physicalCluster, virtualClusters, "
                    f"skuTypes, cellTypes, physicalCells or {GRACE_KEY}",
                )
        physical = root.get("physicalCluster")
        if physical is not None and not isinstance(physical, Mapping):
            self.problem(("physicalCluster",), "must be a mapping")
            physical = None
        if physical is not None:
            for key in physical:
                if key not in SECTION_KEYS:
                    self.problem(
                        ("physicalCluster", str(key)),
                        "unknown key; expected skuTypes, cellTypes or physicalCells",
                    )
        sections: dict[str, tuple[object, Path]] = {}
        for key in SECTION_KEYS:
            nested = physical.get(key) if physical is not None else None
            if nested is not None and root.get(key) is not None:
                self.problem((key,), "given both at the top level and under physicalCluster")
            if nested is not None:
                sections[key] = (nested, ("physicalCluster", key))
            else:
                sections[key] = (root.get(key), (key,))
        return sections

    def _sku_types(self, data: object, path: Path) -> dict[str, SkuType]:
        if not isinstance(data, Mapping) or not data:
            self.problem(path, "skuTypes is required: a mapping of SKU name to {gpu, cpu, memory}")
            return {}
        skus: dict[str, SkuType] = {}
        for name, spec in data.items():
            here = (*path, str(name))
            if not isinstance(spec, Mapping):
                self.problem(here, "must be a mapping with gpu, cpu and memory")
                continue
            self._unknown_keys(spec, here, {"gpu", "cpu", "memory", "gpuMemory", "device"})
            gpu = self._count(spec.get("gpu", 0), (*here, "gpu"), minimum=0)
            cpu = self._count(spec.get("cpu", 0), (*here, "cpu"), minimum=0)
            memory = self._memory(spec.get("memory", 0), (*here, "memory"))
            gpu_memory = self._memory(spec.get("gpuMemory", 0), (*here, "gpuMemory"))
            device = self._device_kind(spec, here, gpu)
            if gpu is None or cpu is None:
                continue
            if gpu == 0 and cpu == 0 and memory == 0:
                self.problem(here, "a SKU must provide some gpu, cpu or memory per leaf cell")
            if gpu_memory and gpu == 0:
                self.problem((*here, "gpuMemory"), "only a SKU with GPUs can declare gpuMemory")
            skus[str(name)] = SkuType(str(name), gpu, cpu, memory, gpu_memory, device)
        return skus

    def _device_kind(self, spec: Mapping[str, object], path: Path, gpu: int | None) -> str:
        """The SKU's device kind (`device`, a CDI kind), the default when absent or wrong (the
        problem is recorded)."""
        if "device" not in spec:
            return DEFAULT_DEVICE_KIND
        device = spec["device"]
        if (problem := kind_problem(device)) is not None:
            self.problem((*path, "device"), problem)
            return DEFAULT_DEVICE_KIND
        if gpu == 0:
            self.problem((*path, "device"), "only a SKU with devices (gpu: 1 or more) has a kind")
        return str(device)

    def _memory(self, value: object, path: Path) -> int:
        try:
            return memory_mb(value)
        except ValueError as exc:
            self.problem(path, str(exc))
            return 0

    def _cell_types(self, data: object, path: Path) -> dict[str, CellType]:
        if not isinstance(data, Mapping) or not data:
            self.problem(path, "cellTypes is required: a mapping of cell type name to its children")
            return {}
        types: dict[str, CellType] = {}
        self.declared_cell_types = {str(name) for name in data}
        for name, spec in data.items():
            here = (*path, str(name))
            if str(name) in self.sku_types:
                self.problem(here, f"'{name}' is both a cell type and a SKU type")
            if not isinstance(spec, Mapping):
                self.problem(here, "must be a mapping with childCellType and childCellNumber")
                continue
            self._unknown_keys(spec, here, {"childCellType", "childCellNumber", "isNodeLevel"})
            child = spec.get("childCellType")
            if not isinstance(child, str) or not child:
                self.problem((*here, "childCellType"), "required: the name of the child cell type")
                continue
            number = self._count(spec.get("childCellNumber"), (*here, "childCellNumber"), 1)
            node_level = spec.get("isNodeLevel", False)
            if not isinstance(node_level, bool):
                self.problem((*here, "isNodeLevel"), f"must be true or false, got {node_level!r}")
                node_level = False
            if number is not None:
                types[str(name)] = CellType(str(name), child, number, node_level)
        return types

    def _check_type_graph(self, path: Path) -> None:
        """Every chain of child types must end at a SKU, without cycles."""
        for name, cell_type in self.cell_types.items():
            seen = [name]
            child = cell_type.child_type
            while child in self.cell_types and child not in seen:
                seen.append(child)
                child = self.cell_types[child].child_type
            if child in seen:
                cycle = " -> ".join([*seen[seen.index(child) :], child])
                self.problem((*path, name), f"cell types form a cycle: {cycle}")
            elif child not in self.sku_types and child == cell_type.child_type:
                self.problem(
                    (*path, name, "childCellType"),
                    f"unknown cell type '{child}': it is neither in cellTypes nor in skuTypes",
                )

    def _chain(self, top_type: str, path: Path) -> Chain | None:
        if top_type in self.chains:
            return self.chains[top_type]
        types: list[str] = []
        numbers: list[int] = []
        current = top_type
        while current in self.cell_types:
            if current in types:
                return None  # the cycle was already reported
            types.append(current)
            numbers.append(self.cell_types[current].child_number)
            current = self.cell_types[current].child_type
        if current not in self.sku_types:
            return None  # the unknown type was already reported
        types.append(current)
        numbers.append(0)
        types.reverse()
        numbers.reverse()
        node_levels = [
            level
            for level, name in enumerate(types, start=1)
            if name in self.cell_types and self.cell_types[name].is_node_level
        ]
        if len(node_levels) != 1:
            found = ", ".join(types[level - 1] for level in node_levels) or "none"
            self.problem(
                path,
                f"the types under '{top_type}' must have exactly one node-level type "
                f"(isNodeLevel: true, the type that is one machine); found {found}",
            )
            return None
        chain = Chain(top_type, tuple(types), tuple(numbers), node_levels[0], types[0])
        self.chains[top_type] = chain
        return chain

    # -- physical cells -------------------------------------------------------------------------

    def _physical_cells(self, data: object, path: Path) -> list[_RawCell]:
        if not isinstance(data, list) or not data:
            self.problem(path, "physicalCells is required: a list of top-level cells")
            return []
        tops: list[_RawCell] = []
        self._node_names: dict[str, Path] = {}
        for index, item in enumerate(data):
            here = (*path, index)
            if not isinstance(item, Mapping):
                self.problem(here, "must be a mapping with cellType")
                continue
            top_type = item.get("cellType")
            if top_type in self.declared_cell_types and top_type not in self.cell_types:
                continue  # its own definition is broken and was reported there
            if not isinstance(top_type, str) or top_type not in self.cell_types:
                known = ", ".join(self.cell_types) or "none"
                self.problem(
                    (*here, "cellType"), f"unknown cell type {top_type!r} (cell types: {known})"
                )
                continue
            chain = self._chain(top_type, here)
            if chain is None:
                continue
            cell = self._physical_cell(
                item, here, chain, chain.top_level, parent_address="", default_own=index
            )
            if cell is not None:
                tops.append(cell)
        return tops

    def _physical_cell(
        self,
        item: Mapping[str, object],
        path: Path,
        chain: Chain,
        level: int,
        parent_address: str,
        default_own: int,
        pinned_above: str | None = None,
    ) -> _RawCell | None:
        cell_type = chain.type_at(level)
        keys = {"cellType", "cellAddress", "pinnedCellId", "cellChildren"}
        if level == chain.node_level:
            keys |= {"nodeAddress", "address", "rdma"}
        self._unknown_keys(item, path, keys)
        declared = item.get("cellType")
        if declared is not None and declared != cell_type:
            self.problem((*path, "cellType"), f"is {declared!r} but this level holds '{cell_type}'")
        own = item.get("cellAddress")
        node_name: str | None = None
        leaf_index: int | None = None
        if level == chain.node_level:
            if not isinstance(own, str | int) or isinstance(own, bool) or str(own) == "":
                self.problem(
                    path, f"node-level cell ({cell_type}) needs cellAddress: the node name"
                )
                return None
            node_name = str(own)
            if "/" in node_name:
                self.problem((*path, "cellAddress"), f"node name {node_name!r} must not contain /")
            elif node_name in self._node_names:
                first = self.located.where(self._node_names[node_name])
                self.problem(
                    (*path, "cellAddress"), f"node '{node_name}' is also defined at {first}"
                )
            else:
                self._node_names[node_name] = path
        elif level == 1:
            leaf_index = default_own
            if own is not None:
                if isinstance(own, bool) or not str(own).isdigit():
                    self.problem(
                        (*path, "cellAddress"), f"a leaf's cellAddress is its index, got {own!r}"
                    )
                else:
                    leaf_index = int(str(own))
        address_part = str(own) if own is not None else str(default_own)
        address = f"{parent_address}/{address_part}" if parent_address else address_part
        pinned = item.get("pinnedCellId")
        if pinned is not None:
            pinned = self._pinned_id(pinned, (*path, "pinnedCellId"), pinned_above)
        cell = _RawCell(cell_type, level, address, pinned, path, node_name=node_name)
        cell.leaf_index = leaf_index
        if node_name is not None:
            raw_address = item.get("nodeAddress", item.get("address"))
            if raw_address is not None:
                if not isinstance(raw_address, str) or not raw_address.strip():
                    self.problem(
                        path, f"nodeAddress must be a host name or IP, got {raw_address!r}"
                    )
                else:
                    cell.node_address = raw_address.strip()
            rdma = item.get("rdma", False)
            if not isinstance(rdma, bool):
                self.problem((*path, "rdma"), f"must be true or false, got {rdma!r}")
            elif rdma:
                self._rdma_nodes.add(node_name)
        children = item.get("cellChildren")
        if level == 1:
            if children is not None:
                self.problem((*path, "cellChildren"), f"'{cell_type}' is a leaf cell (a SKU)")
            return cell
        child_number = chain.child_numbers[level - 1]
        if children is None:
            children = []
        if not isinstance(children, list):
            self.problem((*path, "cellChildren"), "must be a list")
            return None
        if len(children) > child_number:
            self.problem(
                (*path, "cellChildren"),
                f"'{cell_type}' has {child_number} children but {len(children)} are listed",
            )
            return None
        for index in range(child_number):
            child_item = children[index] if index < len(children) else {}
            child_path = (*path, "cellChildren", index)
            if not isinstance(child_item, Mapping):
                self.problem(child_path, "must be a mapping")
                continue
            # Below the node, default addresses continue the parent's numbering so that leaves
            # get consecutive indices 0..n-1 across the whole node (HiveD's rule).
            below_node = level < chain.node_level
            child_default = default_own * child_number + index if below_node else index
            child = self._physical_cell(
                child_item,
                child_path,
                chain,
                level - 1,
                address,
                child_default,
                pinned_above=pinned or pinned_above,
            )
            if child is not None:
                cell.children.append(child)
        if level == chain.node_level:
            self._check_leaf_indices(cell)
        return cell

    def _pinned_id(self, value: object, path: Path, pinned_above: str | None) -> str | None:
        if not isinstance(value, str) or not value:
            self.problem(path, f"pinnedCellId must be a non-empty string, got {value!r}")
            return None
        if pinned_above is not None:
            self.problem(path, f"pinned cell '{value}' is inside pinned cell '{pinned_above}'")
            return None
        if value in self.pinned:
            first = self.located.where(self.pinned[value])
            self.problem(path, f"pinnedCellId '{value}' is also used at {first}")
            return None
        self.pinned[value] = path[:-1]
        return value

    def _check_leaf_indices(self, node: _RawCell) -> None:
        seen: set[int] = set()
        for leaf in node.leaves():
            if leaf.leaf_index in seen:
                self.problem(
                    leaf.path, f"leaf index {leaf.leaf_index} repeats in '{node.node_name}'"
                )
            if leaf.leaf_index is not None:
                seen.add(leaf.leaf_index)

    def _node_addresses(self) -> dict[str, str]:
        nodes = [cell for top in self.tops for cell in _walk(top) if cell.node_name is not None]
        given = [cell for cell in nodes if cell.node_address is not None]
        if given and len(given) != len(nodes):
            missing = [cell.node_name for cell in nodes if cell.node_address is None]
            self.problem(
                ("physicalCells",),
                "either every node sets nodeAddress or none does (then they get 127.0.0.1, "
                f"127.0.0.2, ...); missing on: {', '.join(str(name) for name in missing[:10])}",
            )
            return {}
        addresses: dict[str, str] = {}
        owner: dict[str, str] = {}
        for index, cell in enumerate(nodes):
            assert cell.node_name is not None
            address = cell.node_address or str(ipaddress.IPv4Address(FIRST_LOOPBACK + index))
            if address in owner:
                self.problem(
                    cell.path, f"nodeAddress {address} is also used by node '{owner[address]}'"
                )
            owner[address] = cell.node_name
            addresses[cell.node_name] = address
        return addresses

    # -- virtual clusters ----------------------------------------------------------------------

    def _virtual_clusters(self, data: object, path: Path) -> dict[str, VirtualClusterSpec]:
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping of VC name to {virtualCells, pinnedCells}")
            return {}
        vcs: dict[str, VirtualClusterSpec] = {}
        pinned_owner: dict[str, str] = {}
        for name, spec in data.items():
            vc = str(name)
            here = (*path, vc)
            if not VC_NAME.match(vc):
                self.problem(here, f"VC name '{vc}' may only use letters, digits and _")
            if spec is None:
                spec = {}
            if not isinstance(spec, Mapping):
                self.problem(here, "must be a mapping with virtualCells and/or pinnedCells")
                continue
            self._unknown_keys(spec, here, {"virtualCells", "pinnedCells", "userLimit"})
            cells = self._virtual_cells(vc, spec.get("virtualCells") or [], (*here, "virtualCells"))
            pinned: list[str] = []
            items = spec.get("pinnedCells") or []
            if not isinstance(items, list):
                self.problem((*here, "pinnedCells"), "must be a list of {pinnedCellId}")
                items = []
            for index, item in enumerate(items):
                item_path = (*here, "pinnedCells", index)
                pinned_id = item.get("pinnedCellId") if isinstance(item, Mapping) else None
                if not isinstance(pinned_id, str):
                    self.problem(item_path, "must be a mapping {pinnedCellId: <id>}")
                elif pinned_id not in self.pinned:
                    known = ", ".join(self.pinned) or "none"
                    self.problem(
                        item_path,
                        f"VC '{vc}': unknown pinnedCellId '{pinned_id}' (pinned cells: {known})",
                    )
                elif pinned_id in pinned_owner:
                    self.problem(
                        item_path,
                        f"VC '{vc}': pinned cell '{pinned_id}' already belongs to VC "
                        f"'{pinned_owner[pinned_id]}'; a pinned cell has one owner",
                    )
                else:
                    pinned_owner[pinned_id] = vc
                    pinned.append(pinned_id)
            user_limit = self._user_limit(spec.get("userLimit"), (*here, "userLimit"))
            vcs[vc] = VirtualClusterSpec(vc, tuple(cells), tuple(pinned), user_limit)
        for pinned_id, pinned_path in self.pinned.items():
            if pinned_id not in pinned_owner:
                self.problem(
                    pinned_path,
                    f"pinned cell '{pinned_id}' is not given to any VC "
                    "(list it under some VC's pinnedCells, or drop the pinnedCellId)",
                )
        return vcs

    def _user_limit(self, data: object, path: Path) -> UserLimit:
        """`userLimit: {gpus, cpus, jobs}`, each optional: what one user may hold at once."""
        if data is None:
            return UserLimit()
        if not isinstance(data, Mapping):
            self.problem(path, "must be a mapping with gpus, cpus and/or jobs")
            return UserLimit()
        self._unknown_keys(data, path, {"gpus", "cpus", "jobs"})
        gpus, cpus, jobs = data.get("gpus"), data.get("cpus"), data.get("jobs")
        return UserLimit(
            None if gpus is None else self._amount(gpus, (*path, "gpus")),
            None if cpus is None else self._amount(cpus, (*path, "cpus")),
            None if jobs is None else self._count(jobs, (*path, "jobs"), minimum=0),
        )

    def _amount(self, value: object, path: Path) -> float | None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < math.inf
        ):
            self.problem(path, f"must be a number >= 0, got {value!r}")
            return None
        return float(value)

    def _virtual_cells(self, vc: str, items: object, path: Path) -> list[VirtualCellSpec]:
        if not isinstance(items, list):
            self.problem(path, "must be a list of {cellType, cellNumber}")
            return []
        cells: list[VirtualCellSpec] = []
        for index, item in enumerate(items):
            here = (*path, index)
            if not isinstance(item, Mapping):
                self.problem(here, "must be a mapping {cellType, cellNumber}")
                continue
            self._unknown_keys(item, here, {"cellType", "cellNumber"})
            type_path = item.get("cellType")
            number = self._count(item.get("cellNumber"), (*here, "cellNumber"), minimum=1)
            if not isinstance(type_path, str) or not type_path:
                self.problem((*here, "cellType"), "required: <chain>.<...>.<cell type>")
                continue
            resolved = self._resolve_virtual_type(vc, type_path, (*here, "cellType"))
            if resolved is not None and number is not None:
                cells.append(VirtualCellSpec(resolved[0], resolved[1], number))
        return cells

    def _resolve_virtual_type(self, vc: str, type_path: str, path: Path) -> tuple[str, str] | None:
        parts = type_path.split(".")
        chain = self.chains.get(parts[0])
        if chain is None:
            known = ", ".join(self.chains) or "none"
            self.problem(
                path,
                f"VC '{vc}': '{parts[0]}' is not the type of a top-level physical cell "
                f"(chains: {known})",
            )
            return None
        for upper, lower in itertools.pairwise(parts):
            if lower not in chain.types or chain.level_of(lower) != chain.level_of(upper) - 1:
                below = chain.type_at(chain.level_of(upper) - 1) if upper != chain.types[0] else ""
                hint = f"; the child of '{upper}' is '{below}'" if below else ""
                self.problem(
                    path, f"VC '{vc}': '{type_path}' is not a path of chain '{chain.name}'{hint}"
                )
                return None
        return chain.name, parts[-1]

    # -- feasibility ---------------------------------------------------------------------------

    def _check_feasibility(self, vcs: Mapping[str, VirtualClusterSpec]) -> None:
        """HiveD's start-up check, made exact: walk each chain top-down over the cells that stay
        free once pinned cells are taken out, and fail where the VCs ask for more than is left."""
        for chain in self.chains.values():
            free = [0] * (chain.top_level + 1)
            for top in self.tops:
                if top.cell_type == chain.name:
                    _count_free(top, free)
            demand: dict[int, dict[str, int]] = {}
            for vc in vcs.values():
                for cell in vc.virtual_cells:
                    if cell.chain == chain.name:
                        level = chain.level_of(cell.cell_type)
                        per_vc = demand.setdefault(level, {})
                        per_vc[vc.name] = per_vc.get(vc.name, 0) + cell.number
            available = 0
            for level in range(chain.top_level, 0, -1):
                available += free[level]
                asked = demand.get(level, {})
                left = available - sum(asked.values())
                if left < 0:
                    who = ", ".join(f"'{name}' {count}" for name, count in asked.items())
                    self.problem(
                        ("virtualClusters",),
                        f"chain '{chain.name}' cannot hold the VCs' cells of type "
                        f"'{chain.type_at(level)}' (level {level}): VCs ask for "
                        f"{sum(asked.values())} ({who}) but only {available} are left after "
                        "the levels above and the pinned cells",
                    )
                    break
                if level > 1:
                    available = left * chain.child_numbers[level - 1]

    # -- helpers -------------------------------------------------------------------------------

    def _count(self, value: object, path: Path, minimum: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(path, f"must be an integer >= {minimum}, got {value!r}")
            return None
        if value < minimum:
            self.problem(path, f"must be >= {minimum}, got {value}")
            return None
        return value

    def _unknown_keys(self, data: Mapping[str, object], path: Path, allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                self.problem(
                    (*path, str(key)), f"unknown key; expected one of {', '.join(sorted(allowed))}"
                )


def _walk(cell: _RawCell) -> list[_RawCell]:
    return [cell, *(item for child in cell.children for item in _walk(child))]


def _count_free(cell: _RawCell, free: list[int]) -> bool:
    """Count, per level, maximal cells holding no pinned cell; return whether `cell` is one."""
    if cell.pinned_cell_id is not None:
        return False
    child_free = [_count_free(child, free) for child in cell.children]
    if all(child_free):
        for child in cell.children:
            free[child.level] -= 1
        free[cell.level] += 1
        return True
    return False
