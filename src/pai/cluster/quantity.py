"""Memory sizes as Kubernetes writes them (`60Gi`, `512Mi`, `64G`), converted to MiB ("MB")."""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|K|M|G|T|P)$")
_BYTES_PER_UNIT = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
}


def memory_mb(value: object) -> int:
    """An int is already MB; a string needs a unit. Raises ValueError with what was expected."""
    if isinstance(value, bool):
        raise ValueError(f"expected an int (MB) or a quantity like 60Gi, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value
    if isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if match:
            number, unit = match.groups()
            return int(float(number) * _BYTES_PER_UNIT[unit] // 2**20)
    raise ValueError(f"expected an int (MB) or a quantity like 60Gi or 512Mi, got {value!r}")
