"""Containers on a real multi-host Ray cluster: `pai up --engine ray` with PAI_ISOLATION=container,
two worker hosts (network namespaces with addresses of their own, `pai.executors.sandboxes.ray`)
whose agents start each task in a container of its image, pulled from the tests' registry.
PAI's parameter-server example spreads over both hosts, and its tasks talk over the network.

Each host has two devices of a kind PAI has no code for, described by a CDI spec only (written
here, `cdi_spec_files`) and declared to Ray as a resource named after the kind; each task gets
exactly the devices the scheduler chose, by their CDI names.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from cdi_spec_files import device_spec
from e2e.pai_process import PaiUp
from e2e.test_container_jobs import in_image
from e2e.test_ray_cluster import alive, gpu_job, ray_sandbox_root, wait_until
from pai.executors.sandboxes.containers import ContainerSandbox

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
WORKERS = ("w1", "w2")
EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
KIND = f"acc.example/npu{uuid.uuid4().hex[:8]}"
"""The hosts' device kind: one PAI has no code for, unique to this run so that no other spec
declares it."""
NPUS = (0, 1)
"""Each host's devices of `KIND`."""


@dataclass(frozen=True)
class RayContainers:
    platform: PaiUp
    registry: str
    """The tests' registry at the head's address on the hosts' network."""


@pytest.fixture(scope="module")
def ray_containers(
    container_sandbox: ContainerSandbox,
    requirement: Callable[[bool, str], None],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RayContainers]:
    root = ray_sandbox_root(requirement, "pai-rayc-")
    from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec

    workers = [WorkerSpec(name, cpus=2, resources={KIND: len(NPUS)}) for name in WORKERS]
    with (
        pytest.MonkeyPatch.context() as patch,
        device_spec(KIND, NPUS, tmp_path_factory.mktemp("npu-files")),  # the hosts share it
    ):
        for name, value in container_sandbox.env.items():
            patch.setenv(name, value)  # the workers' podman uses the sandbox's configuration
        with RaySandbox(root, workers) as ray:
            nodes = "\n".join(
                f"  - {{cellType: NODE, cellAddress: {name}, nodeAddress: "
                f"{ray.worker_address(name)}}}"
                for name in WORKERS
            )
            cluster_file = root / "cluster.yaml"
            cluster_file.write_text(
                "physicalCluster:\n"
                f"  skuTypes: {{NPU: {{gpu: 1, cpu: 1, memory: 512Mi, device: {KIND}}}}}\n"
                "  cellTypes: {NODE: {childCellType: NPU, childCellNumber: 2, isNodeLevel: true}}\n"
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


NPU_REPORT = """
echo "pai=$PAI_DEVICE_INDICES names=$PAI_DEVICES driver=$NPU_DRIVER"
env | grep -E '^NPU_[0-9]+_GIVEN=' | sort
cat /npu/*
ls /dev | grep -E '^npu[0-9]+$'
"""
"""What a task got: the devices PAI names, and the variables, files and device nodes the CDI
spec's devices bring (`cdi_spec_files.device_spec`)."""


def test_each_task_gets_exactly_the_cdi_devices_the_scheduler_chose(
    ray_containers: RayContainers, container_sandbox: ContainerSandbox, python_image: str
) -> None:
    # Both devices of one host for `pair`, so `single` gets one of the other host's two.
    job = gpu_job("npus-ray", {"pair": (1, 2, NPU_REPORT), "single": (1, 1, NPU_REPORT)})
    image = container_sandbox.on(ray_containers.registry, python_image)

    with ray_containers.platform.client() as client:
        client.submit(in_image(job, image, container_sandbox.password))
        done = client.wait("npus-ray", timeout=240)
        reports = {
            role: (task, client.logs("npus-ray", role=role, stream="stdout"))
            for role, task in done.tasks()
        }

    assert done.state == "SUCCEEDED", done.job_status
    assert {task.container_node_name for task, _ in reports.values()} == set(WORKERS)
    for role, (task, said) in reports.items():
        chosen = [int(index) for index in (task.container_gpus or "").split(",")]
        assert len(chosen) == {"pair": 2, "single": 1}[role]
        names = ",".join(f"{KIND}={index}" for index in chosen)
        # Its devices' variables, files and nodes, in the node's numbering; none of another's.
        assert said.splitlines() == [
            f"pai={task.container_gpus} names={names} driver=1.0",
            *(f"NPU_{index}_GIVEN=yes" for index in chosen),
            *(f"npu {index}" for index in chosen),
            *(f"npu{index}" for index in chosen),
        ], role
