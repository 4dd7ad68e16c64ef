"""The floor of free space kept for PAI's store, as an administrator writes it."""

from __future__ import annotations

import pytest

from pai.diskfloor import DiskFloor, DiskFloorError

GIB = 1024**3


def test_by_default_the_smaller_of_five_percent_and_one_gib_is_kept() -> None:
    floor = DiskFloor()

    assert floor.bytes_on(10 * GIB) == 10 * GIB // 20  # 5 % of a small disk
    assert floor.bytes_on(100 * GIB) == GIB  # 1 GiB of a large one


@pytest.mark.parametrize(
    ("written", "on_100_gib"),
    [
        ("2GiB", 2 * GIB),
        ("500MB", 500 * 1000**2),
        ("10%", 10 * GIB),
        ("0", 0),
        ("1.5 GiB", int(1.5 * GIB)),
    ],
)
def test_a_size_or_a_share_can_be_set(written: str, on_100_gib: int) -> None:
    assert DiskFloor.parse(written).bytes_on(100 * GIB) == on_100_gib


@pytest.mark.parametrize("written", ["lots", "150%", "-1GiB", "5 parsecs"])
def test_anything_else_is_refused_saying_how_to_write_it(written: str) -> None:
    with pytest.raises(DiskFloorError, match="PAI_DISK_FLOOR"):
        DiskFloor.parse(written)
