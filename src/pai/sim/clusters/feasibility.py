"""The start-up check that the VCs' quotas fit the physical cluster (HiveD's feasibility walk).

Per cell chain, walk the levels from the top: the cells available at a level are the cells left
at the level above times its child count, minus the cells reserved at this level, by VC quotas
(``virtualCells``) or as pinned cells. A negative remainder anywhere means some VC could be
promised cells that cannot exist.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


class InfeasibleQuotaError(ValueError):
    """The VC quotas of a cluster file ask for more cells than the hardware forms."""


def _chain_types(chain: str, cell_types: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The cell types of a chain from the top down to the leaf type."""
    types = [chain]
    while types[-1] in cell_types:
        types.append(cell_types[types[-1]]["childCellType"])
    return types


def _pinned_cells(
    cells: Sequence[Mapping[str, Any]], types: Sequence[str], depth: int = 0
) -> Iterator[tuple[str, str]]:
    """(cell type, pinned id) of every pinned cell under `cells`, which are at `depth`."""
    for cell in cells:
        if "pinnedCellId" in cell:
            yield types[depth], str(cell["pinnedCellId"])
        yield from _pinned_cells(cell.get("cellChildren", []), types, depth + 1)


def check_quota_feasibility(cluster: Mapping[str, Any]) -> None:
    """Raise `InfeasibleQuotaError` naming the chain, the cell type and who reserves it."""
    physical = cluster["physicalCluster"]
    cell_types: Mapping[str, Mapping[str, Any]] = physical["cellTypes"]
    top_cells = Counter(cell["cellType"] for cell in physical["physicalCells"])

    reserved: Counter[tuple[str, str]] = Counter()
    holders: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
    for vc, spec in cluster.get("virtualClusters", {}).items():
        for cell in spec.get("virtualCells", []):
            path = cell["cellType"].split(".")
            reserved[path[0], path[-1]] += cell["cellNumber"]
            holders[path[0], path[-1]].append(f"VC {vc}")
    for top in physical["physicalCells"]:
        chain = top["cellType"]
        for cell_type, pinned_id in _pinned_cells([top], _chain_types(chain, cell_types)):
            reserved[chain, cell_type] += 1
            holders[chain, cell_type].append(f"pinned cell {pinned_id}")

    for chain, count in top_cells.items():
        available = count
        for cell_type in _chain_types(chain, cell_types):
            key = (chain, cell_type)
            left = available - reserved.pop(key, 0)
            if left < 0:
                raise InfeasibleQuotaError(
                    f"chain {chain}: {', '.join(holders[key])} reserve {available - left} cells "
                    f"of type {cell_type}, but only {available} are left at that level"
                )
            if cell_type in cell_types:
                available = left * cell_types[cell_type]["childCellNumber"]
    if reserved:
        chain, cell_type = next(iter(reserved))
        raise InfeasibleQuotaError(
            f"{', '.join(holders[chain, cell_type])} reserve cells of type {cell_type} in "
            f"chain {chain}, which has no such level"
        )
