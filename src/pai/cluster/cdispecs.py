"""The Container Device Interface (CDI) specs of this node: which devices of which kinds it has,
and the device nodes each one brings.

Every vendor ships a generator of these specs (`nvidia-ctk cdi generate`, AMD's and Intel's CDI
tools, Ascend's), and one can be written by hand for any device; container runtimes read them
from `/etc/cdi` and `/var/run/cdi`. `PAI_CDI_SPEC_DIRS` (folders separated by `:`) replaces
those two, for a node whose runtime is configured otherwise, and for tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from pai.cluster.devices import KIND_PATTERN, device_name

DEFAULT_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
CDI_DIRS_VARIABLE = "PAI_CDI_SPEC_DIRS"
SPEC_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class CdiDevice:
    """One device of a spec: its kind, name (`0`, `1`, `all`, a UUID ...) and the host paths
    of its device nodes (its own and those the whole spec adds)."""

    kind: str
    name: str
    host_nodes: tuple[Path, ...] = ()


def cdi_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The folders specs are read from: `PAI_CDI_SPEC_DIRS`, else CDI's two defaults."""
    listed = (os.environ if environ is None else environ).get(CDI_DIRS_VARIABLE, "")
    folders = tuple(Path(part) for part in listed.split(":") if part)
    return folders or DEFAULT_CDI_DIRS


def read_devices(directories: Sequence[Path] | None = None) -> list[CdiDevice]:
    """Every device of every readable spec under `directories`, in file order; a spec that
    cannot be read or parsed is passed over (the runtime refuses it too, with its own words)."""
    devices = []
    for spec in _spec_files(cdi_dirs() if directories is None else directories):
        devices.extend(_devices_of(spec))
    return devices


def declared_devices(directories: Sequence[Path] | None = None) -> set[str]:
    """The CDI names (`KIND=NAME`) of the devices the specs under `directories` declare."""
    return {device_name(device.kind, device.name) for device in read_devices(directories)}


def host_nodes(
    kind: str, names: Sequence[str], directories: Sequence[Path] | None = None
) -> list[Path]:
    """The device nodes on the host of the devices `names` of `kind`, each once."""
    wanted = set(names)
    found = (
        node
        for device in read_devices(directories)
        if device.kind == kind and device.name in wanted
        for node in device.host_nodes
    )
    return list(dict.fromkeys(found))


def numbered_devices(directories: Sequence[Path] | None = None) -> dict[str, list[CdiDevice]]:
    """Per kind, its devices named by an index (0, 1, ...), which are those PAI hands out
    (`all`, UUIDs and other aliases of the same devices are left out), in index order."""
    per_kind: dict[str, dict[int, CdiDevice]] = {}
    for device in read_devices(directories):
        if device.name.isdigit():
            per_kind.setdefault(device.kind, {}).setdefault(int(device.name), device)
    return {kind: [found[i] for i in sorted(found)] for kind, found in sorted(per_kind.items())}


def _spec_files(directories: Sequence[Path]) -> Iterator[Path]:
    for directory in directories:
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            continue
        yield from (entry for entry in entries if entry.suffix in SPEC_SUFFIXES)


def _devices_of(spec: Path) -> list[CdiDevice]:
    try:
        text = spec.read_text()
        data = json.loads(text) if spec.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError):
        return []
    if not isinstance(data, dict):
        return []
    kind = data.get("kind")
    if not isinstance(kind, str) or not KIND_PATTERN.match(kind):
        return []
    common = _host_nodes(data.get("containerEdits"))
    return [
        CdiDevice(kind, str(entry["name"]), (*_host_nodes(entry.get("containerEdits")), *common))
        for entry in data.get("devices") or []
        if isinstance(entry, dict) and entry.get("name") is not None
    ]


def _host_nodes(edits: object) -> tuple[Path, ...]:
    """The host side of the `deviceNodes` of some containerEdits (`hostPath`, else `path`)."""
    nodes = edits.get("deviceNodes") if isinstance(edits, dict) else None
    return tuple(
        Path(str(node.get("hostPath") or node["path"]))
        for node in nodes or []
        if isinstance(node, dict) and node.get("path")
    )
