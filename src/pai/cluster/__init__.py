"""The cluster file (HiveD format): cell types, physical cells, SKUs, virtual clusters."""

from pai.cluster.detect import detect_local_cluster
from pai.cluster.model import (
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
from pai.cluster.parse import cluster_from_file, cluster_from_yaml, load_cluster

__all__ = [
    "CellType",
    "Chain",
    "ClusterConfig",
    "ClusterConfigError",
    "NodeSpec",
    "PhysicalCellSpec",
    "SkuType",
    "UserLimit",
    "VirtualCellSpec",
    "VirtualClusterSpec",
    "cluster_from_file",
    "cluster_from_yaml",
    "detect_local_cluster",
    "load_cluster",
]
