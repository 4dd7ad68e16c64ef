"""Cluster files (HiveD format) for replaying traces: the Philly and ITP evaluation clusters and
homogeneous clusters of any size, each checked for quota feasibility when built."""

from pai.sim.clusters.apportion import apportion
from pai.sim.clusters.feasibility import InfeasibleQuotaError, check_quota_feasibility
from pai.sim.clusters.itp import ITP_RACK_SIZE, ITP_TARGET_LOAD, itp_cluster
from pai.sim.clusters.philly import (
    PHILLY_RACK_SIZE,
    philly_cluster,
    read_machine_list,
    read_vc_node_quotas,
    vc_shares,
)
from pai.sim.clusters.quotas import PoolSplit, node_quotas
from pai.sim.clusters.topology import (
    ClusterFile,
    NodePool,
    VcNodeQuotas,
    build_cluster,
    intra_node_levels,
    make_cluster,
)
from pai.sim.clusters.yaml_file import cluster_yaml, write_cluster_file

__all__ = [
    "ITP_RACK_SIZE",
    "ITP_TARGET_LOAD",
    "PHILLY_RACK_SIZE",
    "ClusterFile",
    "InfeasibleQuotaError",
    "NodePool",
    "PoolSplit",
    "VcNodeQuotas",
    "apportion",
    "build_cluster",
    "check_quota_feasibility",
    "cluster_yaml",
    "intra_node_levels",
    "itp_cluster",
    "make_cluster",
    "node_quotas",
    "philly_cluster",
    "read_machine_list",
    "read_vc_node_quotas",
    "vc_shares",
    "write_cluster_file",
]
