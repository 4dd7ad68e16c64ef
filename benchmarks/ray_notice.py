"""How long Ray takes to notice a worker host whose network link is cut, by its health check's
settings, against what PAI shows and does meanwhile (docs/deploy.md, "Losing a node").

PAI does not wait for Ray: it shows a silent node unreachable within seconds and retries its
tasks once its agent has stopped them. Ray's own notice still decides when Ray drops the node,
and the settings that shorten it are not the obvious ones: behind a cut network every health
check waits for its timeout. For each setting, a Ray cluster of a head and one worker host in a
network namespace of its own (`pai.executors.sandboxes.ray`; needs root) is started, the worker's
link is cut (its veth down), and the time until Ray lists the node dead is measured.

    python benchmarks/ray_notice.py [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

SETTINGS = {
    "Ray's defaults (period 3 s, threshold 5, timeout 10 s)": {},
    "period 1 s, threshold 3": {
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
    },
    "period 1 s, threshold 3, timeout 1 s": {
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
        "RAY_health_check_timeout_ms": "1000",
    },
}
WORKER = "w1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # measure one setting, in a child
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(SETTINGS[args.one])))
        return
    if os.geteuid() != 0:
        print(json.dumps({"skipped": "network namespaces need root"}))
        return
    results = {}
    for name in SETTINGS:
        # A process per cluster: Ray reads its authentication token once, when imported.
        child = subprocess.run(
            [sys.executable, __file__, "--one", name], capture_output=True, text=True, check=True
        )
        results[name] = json.loads(child.stdout.splitlines()[-1])
    if args.json:
        print(json.dumps(results))
        return
    table = Table(title="Ray's notice of a worker behind a cut link")
    for column in ("head's health check", "Ray lists the node dead after"):
        table.add_column(column)
    for name, result in results.items():
        table.add_row(name, f"{result['notice_s']:.1f} s")
    Console().print(table)


def measure(head_env: dict[str, str]) -> dict[str, float]:
    from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec

    # Short: Ray's socket paths live under it and must stay within the kernel's 107 bytes.
    with (
        tempfile.TemporaryDirectory(prefix="pai-notice-", dir="/tmp") as directory,
        RaySandbox(Path(directory), [WorkerSpec(WORKER, cpus=1)], head_env) as sandbox,
    ):
        os.environ.update(sandbox.env)
        import ray

        ray.init(address=sandbox.address, logging_level=logging.WARNING, log_to_driver=False)
        try:
            cut_at = time.monotonic()
            sandbox.cut(WORKER)
            while _alive(ray.nodes()):
                time.sleep(0.1)
            notice = time.monotonic() - cut_at
            sandbox.reconnect(WORKER)
        finally:
            ray.shutdown()
    return {"notice_s": round(notice, 1)}


def _alive(nodes: list[dict[str, object]]) -> bool:
    return any(node.get("NodeName") == WORKER and node["Alive"] for node in nodes)


if __name__ == "__main__":
    main()
