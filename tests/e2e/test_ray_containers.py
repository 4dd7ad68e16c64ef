"""Containers on a real multi-host Ray cluster: `pai up --engine ray` with PAI_ISOLATION=container,
two worker hosts (network namespaces with addresses of their own, `pai.executors.sandboxes.ray`)
whose agents start each task in a container of its image, pulled from the tests' registry.
PAI's parameter-server example spreads over both hosts, and its tasks talk over the network.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from e2e.pai_process import PaiUp
from e2e.test_container_jobs import in_image
from e2e.test_ray_cluster import alive, ray_sandbox_root, wait_until
from pai.executors.sandboxes.containers import ContainerSandbox

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
WORKERS = ("w1", "w2")
EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"


@dataclass(frozen=True)
class RayContainers:
    platform: PaiUp
    registry: str
    """The tests' registry at the head's address on the hosts' network."""


@pytest.fixture(scope="module")
def ray_containers(
    container_sandbox: ContainerSandbox, requirement: Callable[[bool, str], None]
) -> Iterator[RayContainers]:
    root = ray_sandbox_root(requirement, "pai-rayc-")
    from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec

    with pytest.MonkeyPatch.context() as patch:
        for name, value in container_sandbox.env.items():
            patch.setenv(name, value)  # the workers' podman uses the sandbox's configuration
        with RaySandbox(root, [WorkerSpec(name, cpus=2) for name in WORKERS]) as ray:
            nodes = "\n".join(
                f"  - {{cellType: NODE, cellAddress: {name}, nodeAddress: "
                f"{ray.worker_address(name)}}}"
                for name in WORKERS
            )
            cluster_file = root / "cluster.yaml"
            cluster_file.write_text(
                "physicalCluster:\n"
                "  skuTypes: {CPU: {gpu: 0, cpu: 1, memory: 512Mi}}\n"
                "  cellTypes: {NODE: {childCellType: CPU, childCellNumber: 2, isNodeLevel: true}}\n"
                f"  physicalCells:\n{nodes}\n"
                "virtualClusters:\n  default: {virtualCells: [{cellType: NODE, cellNumber: 2}]}\n"
            )
            env = {
                **ray.env,
                "PAI_ENGINE": "ray",
                "PAI_RAY_ADDRESS": ray.address,
                "PAI_RAY_NODE_DIR": str(root / "nodes"),
                "PAI_ISOLATION": "container",
            }
            pai = PaiUp(root / "home", cluster_file, env)
            registry = container_sandbox.serve_on(ray.head_ip)
            pai.start()
            try:
                with pai.client() as client:
                    wait_until(lambda: alive(client) == set(WORKERS), "both workers alive")
                yield RayContainers(pai, registry)
            finally:
                pai.stop()


def test_the_parameter_server_example_trains_across_two_hosts_in_containers(
    ray_containers: RayContainers, container_sandbox: ContainerSandbox, python_image: str
) -> None:
    job = yaml.safe_load((EXAMPLES / "ps-worker.yaml").read_text())
    job["name"] = "ps-worker-ray"
    # The workers reach the registry at the head's address on the hosts' network.
    image = container_sandbox.on(ray_containers.registry, python_image)
    text = in_image(yaml.safe_dump(job), image, container_sandbox.password)

    with ray_containers.platform.client() as client:
        client.submit(text)
        done = client.wait("ps-worker-ray", timeout=240)
        log = client.logs("ps-worker-ray", role="ps", stream="stdout")
        tasks = done.tasks()

    assert done.state == "SUCCEEDED", done.job_status
    assert {task.isolation for _, task in tasks} == {"container"}
    assert {task.container_node_name for _, task in tasks} == set(WORKERS)  # over the network
    assert "final parameters: [-0.9, -0.6]" in log
