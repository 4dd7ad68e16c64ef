"""Task ports of one pytest process: under pytest-xdist, each worker's platforms hand out the
ports of a share of PAI's task port range that no other worker uses.

A platform hands out task ports from the bottom of its range up, on the nodes of its cluster
file, which are this machine's loopback addresses (examples/clusters/local-4node.yaml); a port
is checked free when it is handed out, and taken only when the task listens on it. Two platforms
running at once, one on each worker, would hand the same ports to tasks that listen at the same
time: a JupyterLab that finds its port taken moves to another one, where the portal's proxy
never reaches it. With a share each, every platform a worker starts, in its own process or as
`pai up` and `pai serve` (`pai_command`), keeps to ports no other worker hands out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pai.runtime.ports import DEFAULT_PORT_RANGE, PortAllocator


def worker_share() -> tuple[int, int] | None:
    """This xdist worker's `[start, end)` of the task port range; None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return None
    index = int(worker.removeprefix("gw"))
    count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    start, end = DEFAULT_PORT_RANGE
    width = (end - start) // count
    return start + index * width, start + (index + 1) * width


def use_share(share: tuple[int, int]) -> None:
    """Make `share` the range of every port allocator this process makes without one."""
    PortAllocator.__init__.__defaults__ = share
    made = PortAllocator(probe=None).port_range
    assert made == share, f"the task port range is {made}, not this worker's share {share}"


def use_worker_share() -> None:
    """`use_share(worker_share())` under xdist; nothing otherwise."""
    share = worker_share()
    if share is not None:
        use_share(share)


def pai_command(pai: Path, python: str | None = None) -> list[str]:
    """The command line that runs the `pai` script at `pai` (or PAI with another `python`),
    with this worker's share."""
    share = worker_share()
    if share is None:
        return [str(pai)] if python is None else [python, "-m", "pai.cli.main"]
    here = str(Path(__file__).parent)
    code = (
        f"import sys; sys.path.insert(0, {here!r}); import task_ports; sys.path.remove({here!r}); "
        f"task_ports.use_share({share!r}); "
        f"sys.argv[0] = {str(pai)!r}; "
        "from pai.cli.main import main; "
        "sys.exit(main())"
    )
    return [python or sys.executable, "-c", code]
