"""Device kinds: what a SKU's devices are, named as the Container Device Interface (CDI) names
them (`VENDOR/CLASS`, e.g. `nvidia.com/gpu`, `amd.com/gpu`, `acc.example/npu`).

A device's full CDI name is `KIND=NAME`; PAI names a node's devices of a kind by their index
(the leaf cell's address under its node), so a spec for a kind PAI has no code for only needs
devices named 0, 1, ... (`pai.cluster.cdispecs` reads such specs).
"""

from __future__ import annotations

import re

DEFAULT_DEVICE_KIND = "nvidia.com/gpu"
"""The kind of a SKU that names none: OpenPAI's files describe NVIDIA GPUs."""

# CDI's own rules: a vendor is a domain-like name, a class a plain word (letters, digits, `-`,
# `_`), each starting with a letter and ending with a letter or digit.
_VENDOR = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_CLASS = r"[A-Za-z](?:[A-Za-z0-9_-]*[A-Za-z0-9])?"
KIND_PATTERN = re.compile(rf"^{_VENDOR}/{_CLASS}$")


def kind_problem(value: object) -> str | None:
    """Why `value` is not a CDI kind, or None when it is one."""
    if isinstance(value, str) and KIND_PATTERN.match(value):
        return None
    return (
        f"must be a CDI device kind VENDOR/CLASS (like {DEFAULT_DEVICE_KIND} or "
        f"acc.example/npu: the vendor a domain name, the class letters, digits, '-' or '_'), "
        f"got {value!r}"
    )


def device_name(kind: str, name: int | str) -> str:
    """The CDI name of device `name` (its index on its node) of `kind`: `acc.example/npu=1`."""
    return f"{kind}={name}"


def device_noun(kind: str, count: float) -> str:
    """How messages count `count` devices of `kind`: GPU(s) for the default kind, else the
    kind itself ("2 GPUs", "4 of 8 acc.example/npu in use")."""
    if kind == DEFAULT_DEVICE_KIND:
        return "GPU" if 0 < count <= 1 else "GPUs"
    return kind
