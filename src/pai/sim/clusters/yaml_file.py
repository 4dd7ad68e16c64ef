"""Writing a generated cluster file as YAML, the form PAI's cluster loader and HiveD read."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from pai.sim.clusters.topology import ClusterFile

# Plain scalars that a YAML 1.2 reader (Go's yaml.v3 in HiveD, ruamel) would take for a number,
# a boolean or null, although PyYAML's YAML 1.1 rules keep some as text: Philly's VC names are
# hex hashes such as 6214e9, which YAML 1.2 reads as 6.214e12.
_NOT_TEXT_IN_YAML_1_2 = re.compile(
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+"
    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|true|True|TRUE|false|False|FALSE|null|Null|NULL|~|"
)


class _ClusterDumper(yaml.SafeDumper):
    """Quotes every string that would not read back as the same string under YAML 1.2."""


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if _NOT_TEXT_IN_YAML_1_2.fullmatch(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ClusterDumper.add_representer(str, _represent_text)


def cluster_yaml(cluster: ClusterFile) -> str:
    """The cluster as YAML text, keys in the order they were built (readable top-down)."""
    return yaml.dump(
        cluster, Dumper=_ClusterDumper, sort_keys=False, default_flow_style=False, width=100
    )


def write_cluster_file(cluster: ClusterFile, path: str | Path) -> Path:
    """Write the cluster as YAML; the file appears complete or not at all."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(cluster_yaml(cluster), encoding="utf-8")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target
