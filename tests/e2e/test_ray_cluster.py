"""PAI on a real multi-host Ray cluster: `pai up --engine ray`, driven through its REST API.

The cluster is a Ray head on this machine and two workers, each in a network namespace of its
own with its own address (`pai.executors.sandboxes.ray`), so a job's tasks run on distinct hosts
and talk over a network. Each worker declares two GPUs to Ray (`ray start --num-gpus 2`) that
the machine lacks: binding a task to GPUs is handing it the indices the scheduler chose, which
the tasks print. The cluster file also names a third node that never joins Ray.

The module ends with the same Ray cluster met by a new store (a new home and database, no
cluster file): the node types PAI describes from Ray's nodes, tasks whose keys the old store
used too, and a worker whose link is cut while it runs a task.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cli.pai_runner import make_pai
from e2e.pai_process import ADMIN_PASSWORD, PaiUp
from pai.cluster import cluster_from_file
from pai.sdk import Client
from pai.sdk.errors import NotFoundError
from pai.sdk.job_models import JobDetail
from web.portal_client import send_login

# All on one worker, which starts the module's Ray cluster once: a cluster per worker would mean
# several `ray start` at once, which miss Ray's deadlines on a 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

WORKERS = ("w1", "w2")
MISSING_NODE_ADDRESS = "10.255.255.254"
WAIT = 90.0


def wait_until(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.2)


def ray_sandbox_root(requirement: Callable[[bool, str], None], prefix: str) -> Path:
    """A new directory for a Ray sandbox, once this machine can run one."""
    requirement(sys.platform == "linux" and os.geteuid() == 0, "network namespaces need root")
    requirement(shutil.which("ip") is not None, "iproute2 (`ip`) is not installed")
    try:
        import pai.executors.sandboxes.ray  # noqa: F401 - Ray, with the `ray` extra
    except ImportError:
        requirement(False, "Ray is not installed (pip install 'pai[ray]')")
        raise
    # Short: Ray's socket paths live under it and must stay within the kernel's 107 bytes.
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@pytest.fixture(scope="module")
def sandbox(requirement: Callable[[bool, str], None]) -> Iterator[object]:
    from pai.executors.sandboxes.ray import RaySandbox, WorkerSpec

    root = ray_sandbox_root(requirement, "pai-ray-")
    cluster = RaySandbox(root, [WorkerSpec(name, cpus=4, gpus=2) for name in WORKERS])
    with cluster:
        yield cluster


@pytest.fixture(scope="module")
def platform(sandbox: object) -> Iterator[PaiUp]:
    from pai.executors.sandboxes.ray import RaySandbox

    assert isinstance(sandbox, RaySandbox)
    nodes = "\n".join(
        f"  - {{cellType: NODE, cellAddress: {name}, nodeAddress: {address}}}"
        for name, address in [
            *((name, sandbox.worker_address(name)) for name in WORKERS),
            ("w3", MISSING_NODE_ADDRESS),
        ]
    )
    cluster_file = sandbox.root / "cluster.yaml"
    cluster_file.write_text(
        "physicalCluster:\n"
        "  skuTypes: {FAKE-GPU: {gpu: 1, cpu: 1, memory: 256Mi}}\n"
        "  cellTypes: {NODE: {childCellType: FAKE-GPU, childCellNumber: 2, isNodeLevel: true}}\n"
        f"  physicalCells:\n{nodes}\n"
        "virtualClusters:\n  default: {virtualCells: [{cellType: NODE, cellNumber: 3}]}\n"
    )
    env = {
        **sandbox.env,
        "PAI_ENGINE": "ray",
        "PAI_RAY_ADDRESS": sandbox.address,
        "PAI_RAY_NODE_DIR": str(sandbox.root / "nodes"),
        "PAI_MONITOR_INTERVAL": "1",
    }
    pai = PaiUp(sandbox.root / "home", cluster_file, env)
    pai.start()
    with pai.client() as client:
        wait_until(lambda: alive(client) == set(WORKERS), "both workers alive in PAI")
    yield pai
    pai.stop()


@pytest.fixture
def client(sandbox: object, platform: PaiUp) -> Iterator[Client]:
    with platform.client() as connected:
        yield connected
        # A test that failed with a worker stopped must not fail the next ones too.
        for worker in WORKERS:
            if not sandbox.is_running(worker):  # type: ignore[attr-defined]
                restore(sandbox, connected, worker)


def alive(client: Client) -> set[str]:
    return {node.name for node in client.nodes() if node.engine_state == "alive"}


def gpu_job(
    name: str, roles: dict[str, tuple[int, int, str]], *, retries: int = 0, cpus_per_gpu: int = 1
) -> str:
    """A job whose roles are (instances, GPUs each, command)."""
    parts = [
        f"protocolVersion: 2\nname: {name}\ntype: job\njobRetryCount: {retries}\n"
        "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\ntaskRoles:\n"
    ]
    for role, (instances, gpus, command) in roles.items():
        parts.append(
            f"  {role}:\n    instances: {instances}\n    dockerImage: image\n"
            f"    resourcePerInstance: {{cpu: {gpus * cpus_per_gpu}, memoryMB: 256, gpu: {gpus}}}\n"
            f"    commands:\n      - |\n"
            + "".join(f"        {line}\n" for line in command.strip().splitlines())
        )
    return "".join(parts)


def log_so_far(client: Client, name: str) -> str:
    """The job's (only) task's log, or nothing while the task has not started."""
    try:
        return client.logs(name)
    except NotFoundError:
        return ""


def task_hosts(job: JobDetail) -> dict[tuple[str, int], str | None]:
    return {(role, task.task_index): task.container_ip for role, task in job.tasks()}


def node_running(client: Client, name: str) -> str:
    """The worker that runs the job's (only) task."""
    by_address = {node.address: node.name for node in client.nodes()}
    [(_, task)] = client.job(name).tasks()
    assert task.container_ip is not None
    return by_address[task.container_ip]


def restore(sandbox: object, client: Client, worker: str) -> None:
    sandbox.start_worker(worker)  # type: ignore[attr-defined]
    wait_until(lambda: worker in alive(client), f"{worker} rejoins and is alive in PAI")


def test_nodes_come_from_ray_with_their_addresses_and_a_missing_one_is_named(
    sandbox: object, client: Client, platform: PaiUp, tmp_path: Path
) -> None:
    assert client.info().executor == "ray"
    nodes = {node.name: node for node in client.nodes()}

    for name in WORKERS:
        assert nodes[name].engine_state == "alive" and nodes[name].healthy
        assert nodes[name].address == sandbox.worker_address(name)  # type: ignore[attr-defined]
    missing = nodes["w3"]
    assert (missing.engine_state, missing.healthy) == ("gone", False)
    assert missing.engine_message == (
        f"node w3 ({MISSING_NODE_ADDRESS}) is not in the Ray cluster: "
        "no live Ray node has that address or name"
    )
    pai = make_pai(tmp_path)
    login = pai.run(
        "login", "--server", platform.url, "--username", "admin", "--password", ADMIN_PASSWORD
    )
    assert login.returncode == 0, login.stderr
    shown = pai.run("cluster")
    assert shown.returncode == 0, shown.stderr
    assert "alive" in shown.stdout and "gone" in shown.stdout
    assert f"w3: node w3 ({MISSING_NODE_ADDRESS}) is not in the Ray cluster" in shown.stdout
    with httpx.Client(base_url=platform.url) as browser:
        assert send_login(browser, "admin", ADMIN_PASSWORD).status_code == 303
        page = browser.get("/cluster").text
    assert page.count('badge-ok">alive<') == 2 and 'badge-bad">gone<' in page
    assert missing.engine_message in page


SERVER = """
python3 - <<'EOF'
import os, socket
me = os.environ["PAI_HOST_IP_server_0"]
port = int(os.environ["PAI_PORT_LIST_server_0_http"])
print("gpus", os.environ["CUDA_VISIBLE_DEVICES"], os.environ["NVIDIA_VISIBLE_DEVICES"])
with socket.create_server((me, port)) as server:
    connection, (peer, _) = server.accept()
    with connection:
        print("server", me, "heard", connection.recv(100).decode(), "from", peer, flush=True)
        connection.sendall(f"hello from {me}".encode())
EOF
"""
CLIENT = """
python3 - <<'EOF'
import os, socket, time
server = (os.environ["PAI_HOST_IP_server_0"], int(os.environ["PAI_PORT_LIST_server_0_http"]))
for _ in range(300):
    try:
        connection = socket.create_connection(server, timeout=2)
        break
    except OSError:
        time.sleep(0.1)
with connection:
    connection.sendall(os.environ["PAI_CONTAINER_HOST_IP"].encode())
    print("client got:", connection.recv(100).decode(), flush=True)
EOF
"""


def test_two_roles_on_two_hosts_talk_over_tcp_with_only_pai_variables(client: Client) -> None:
    # Each role takes a whole 2-GPU node, so the two must run on the two workers.
    client.submit(gpu_job("talk", {"server": (1, 2, SERVER), "client": (1, 2, CLIENT)}))
    job = client.wait("talk", timeout=WAIT, poll=0.3)

    assert job.state == "SUCCEEDED", client.logs("talk", role="server")
    hosts = task_hosts(job)
    server_ip, client_ip = hosts[("server", 0)], hosts[("client", 0)]
    assert server_ip != client_ip
    server_log = client.logs("talk", role="server")
    assert f"server {server_ip} heard {client_ip} from {client_ip}" in server_log
    assert "gpus 0,1 0,1" in server_log
    assert f"client got: hello from {server_ip}" in client.logs("talk", role="client")


STORAGE_WRITER = 'echo "$PAI_CONTAINER_HOST_IP" > "$PAI_STORAGE_TEAM/from-$PAI_TASK_INDEX.txt"'


def test_tasks_on_two_hosts_write_into_one_storage_mounted_where_the_job_asks(
    sandbox: object, client: Client, tmp_path: Path
) -> None:
    root = sandbox.root / "team-storage"  # type: ignore[attr-defined]
    root.mkdir()
    client.create_storage("team", "directory", {"path": str(root)})
    job = gpu_job("writes", {"worker": (2, 2, STORAGE_WRITER)}).replace(
        "taskRoles:", "extras: {storages: [{name: team, mountPath: /mnt/team}]}\ntaskRoles:"
    )
    client.submit(job)
    finished = client.wait("writes", timeout=WAIT, poll=0.3)

    assert finished.state == "SUCCEEDED", client.logs("writes", index=0, stream="runtime")
    hosts = {index: host for (_, index), host in task_hosts(finished).items()}
    assert len(set(hosts.values())) == 2
    for index, host in hosts.items():
        client.download("team", f"from-{index}.txt", tmp_path / f"{index}.txt")
        assert (tmp_path / f"{index}.txt").read_text() == f"{host}\n"


def test_each_host_measures_its_tasks_and_itself(client: Client, platform: PaiUp) -> None:
    client.submit(gpu_job("measured", {"main": (2, 2, "python3 -c 'while True: pass'")}))
    wait_until(lambda: client.job("measured").state == "RUNNING", "the job runs")

    def measured() -> dict[str, set[str]]:
        text = httpx.get(f"{platform.url}/metrics").text
        found: dict[str, set[str]] = {"task": set(), "node": set()}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name == "task_cpu_percent"
                    and sample.labels["job_name"] == "admin~measured"
                ):
                    found["task"].add(sample.labels["node"])
                elif sample.name == "pai_node_cpu_percent":
                    found["node"].add(sample.labels["node"])
        return found

    wait_until(
        lambda: measured() == {"task": set(WORKERS), "node": set(WORKERS)}, "usage from both hosts"
    )
    client.stop("measured")
    assert client.wait("measured", timeout=WAIT, poll=0.3).state == "STOPPED"


GPU_REPORT = 'echo "visible=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"'


def test_each_task_sees_exactly_the_gpus_the_scheduler_chose(client: Client) -> None:
    client.submit(gpu_job("gpus", {"worker": (4, 1, GPU_REPORT)}))
    job = client.wait("gpus", timeout=WAIT, poll=0.3)

    assert job.state == "SUCCEEDED"
    per_host: dict[str | None, list[str]] = {}
    for _, task in job.tasks():
        chosen = task.container_gpus
        assert chosen is not None
        log = client.logs("gpus", role="worker", index=task.task_index)
        assert f"visible={chosen} nvidia={chosen}" in log
        per_host.setdefault(task.container_ip, []).append(chosen)
    assert sorted(sorted(gpus) for gpus in per_host.values()) == [["0", "1"], ["0", "1"]]


def test_a_gang_that_needs_two_hosts_starts_all_or_nothing(sandbox: object, client: Client) -> None:
    sandbox.stop_worker("w2")  # type: ignore[attr-defined]
    wait_until(lambda: "w2" not in alive(client), "PAI sees w2 gone")
    client.submit(gpu_job("gang", {"worker": (2, 2, "echo on $PAI_CONTAINER_HOST_IP")}))

    # With one 2-GPU host left, neither task may start; the job says why it waits.
    wait_until(lambda: client.job("gang").job_status.wait_reason is not None, "a wait reason")
    job = client.job("gang")
    assert job.state == "WAITING"
    assert all(task.task_state == "WAITING" for _, task in job.tasks())

    restore(sandbox, client, "w2")
    job = client.wait("gang", timeout=WAIT, poll=0.3)
    assert job.state == "SUCCEEDED"
    assert len(set(task_hosts(job).values())) == 2


GREEDY = "python3 -c 'chunk = bytearray(400 * 1024 * 1024); import time; time.sleep(60)'"
STUBBORN = """
trap 'echo got SIGTERM; sleep 60' TERM
echo ready
while true; do sleep 0.1; done
"""


def test_memory_limits_and_stops_hold_on_a_remote_host(client: Client) -> None:
    client.submit(gpu_job("greedy", {"main": (1, 1, GREEDY)}))
    client.submit(gpu_job("stubborn", {"main": (1, 1, STUBBORN)}))
    wait_until(lambda: "ready" in log_so_far(client, "stubborn"), "the stubborn task runs")

    client.stop("stubborn")
    stopped = client.wait("stubborn", timeout=WAIT, poll=0.3)
    greedy = client.wait("greedy", timeout=WAIT, poll=0.3)

    # memoryMB is 256: the task is killed and the exit spec says why.
    assert (greedy.state, greedy.job_status.app_exit_code) == ("FAILED", -1200)
    # SIGTERM first, then SIGKILL once the grace period is over.
    assert (stopped.state, stopped.job_status.app_exit_code) == ("STOPPED", -210)
    assert "got SIGTERM" in client.logs("stubborn")


FOLLOWED = """
echo "first line from $PAI_CONTAINER_HOST_IP"
while [ ! -e {go} ]; do sleep 0.1; done
echo "last line"
"""


def test_logs_are_read_while_running_and_after_the_worker_is_gone(
    sandbox: object, client: Client, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    client.submit(gpu_job("chatty", {"main": (1, 1, FOLLOWED.format(go=go))}))
    wait_until(lambda: "first line" in log_so_far(client, "chatty"), "the first line, running")
    wait_until(lambda: client.job("chatty").state == "RUNNING", "the job shown running")
    go.touch()
    assert client.wait("chatty", timeout=WAIT, poll=0.3).state == "SUCCEEDED"
    worker = node_running(client, "chatty")

    sandbox.stop_worker(worker)  # type: ignore[attr-defined]
    [node_dir] = (sandbox.root / "nodes").glob(f"*/{worker}")  # type: ignore[attr-defined]
    shutil.rmtree(node_dir)  # the node's directory of this store, with the task's own log
    wait_until(lambda: worker not in alive(client), f"PAI sees {worker} gone")
    log = client.logs("chatty")
    followed = list(client.follow_logs("chatty", tail=None))
    restore(sandbox, client, worker)

    address = sandbox.worker_address(worker)  # type: ignore[attr-defined]
    assert f"first line from {address}" in log and "last line" in log
    assert followed == [f"first line from {address}", "last line"]


def test_a_worker_that_stops_mid_job_makes_the_job_retry_on_another_host(
    sandbox: object, client: Client
) -> None:
    client.submit(gpu_job("mover", {"main": (1, 2, "sleep 4\necho done")}, retries=0))
    wait_until(lambda: client.job("mover").state == "RUNNING", "the job runs")
    first = node_running(client, "mover")

    sandbox.stop_worker(first)  # type: ignore[attr-defined]
    job = client.wait("mover", timeout=WAIT, poll=0.3)
    restore(sandbox, client, first)

    assert job.state == "SUCCEEDED"
    # A lost node is the platform's failure: retried, and not charged to the job's retries.
    assert (job.job_status.retries, job.job_status.retry_details.platform) == (1, 1)
    attempts = client.job_attempts("mover")
    lost = next(attempt for attempt in attempts if attempt.job_status.attempt_id == 0)
    assert lost.job_status.app_exit_code == -1001
    assert node_running(client, "mover") != first


def test_a_killed_control_plane_restarts_and_the_job_finishes_once(
    client: Client, platform: PaiUp, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    command = f"echo run >> {runs}\necho before the crash\nsleep 5\necho after the crash"
    client.submit(gpu_job("survivor", {"main": (1, 1, command)}))
    wait_until(lambda: "before the crash" in log_so_far(client, "survivor"), "the job runs")

    platform.kill()
    platform.start()
    with platform.client() as again:
        job = again.wait("survivor", timeout=WAIT, poll=0.3)
        log = again.logs("survivor")

    assert job.state == "SUCCEEDED" and job.job_status.retries == 0
    assert runs.read_text() == "run\n"
    assert "before the crash" in log and "after the crash" in log


NODE_TIMEOUT = 6.0


@pytest.fixture(scope="module")
def reset_platform(sandbox: object, platform: PaiUp) -> Iterator[PaiUp]:
    """PAI with a new store on the same Ray cluster and node directory, without a cluster
    file: as an administrator who reset the store (or installed PAI again) meets it."""
    platform.stop()
    env = {**platform.extra_env, "PAI_RAY_NODE_TIMEOUT": f"{NODE_TIMEOUT:g}"}
    again = PaiUp(sandbox.root / "home-reset", None, env)  # type: ignore[attr-defined]
    again.start("--write-cluster", str(again.home.parent / "written.yaml"))
    with again.client() as client:
        wait_until(lambda: alive(client) == set(WORKERS), "both workers alive in the new PAI")
    yield again
    again.stop()


def test_a_reset_store_runs_a_two_role_job_across_both_hosts_at_its_first_attempt(
    sandbox: object, reset_platform: PaiUp, tmp_path: Path
) -> None:
    with reset_platform.client() as client:
        # Ray measured the two workers' memory apart; they are still one node type.
        assert len({node.sku_type for node in client.nodes()}) == 1
        # The old store's first job was `talk` too: its task keys were this job's keys.
        job = gpu_job("talk", {"server": (1, 2, SERVER), "client": (1, 2, CLIENT)}, cpus_per_gpu=2)
        client.submit(job)
        done = client.wait("talk", timeout=WAIT, poll=0.3)
        server_log = client.logs("talk", role="server")

    assert done.state == "SUCCEEDED", server_log
    assert (done.job_status.retries, done.job_status.attempt_id) == (0, 0)
    hosts = task_hosts(done)
    assert set(hosts.values()) == {sandbox.worker_address(name) for name in WORKERS}  # type: ignore[attr-defined]
    server_ip, client_ip = hosts[("server", 0)], hosts[("client", 0)]
    assert f"server {server_ip} heard {client_ip} from {client_ip}" in server_log
    shown = reset_platform.admin_cli(tmp_path).run("logs", "talk", "--role", "client")
    assert shown.returncode == 0, shown.stderr
    assert f"client got: hello from {server_ip}" in shown.stdout
    printed = reset_platform.output.read_text()
    assert "Cluster file described from Ray's nodes" in printed and "skuTypes:" in printed
    written = cluster_from_file(reset_platform.home.parent / "written.yaml")
    assert {node.name for node in written.nodes} == set(WORKERS)
    assert len({node.sku_type for node in written.nodes}) == 1


HEARTBEAT = """
python3 - <<'EOF'
import os, pathlib, time
runs = pathlib.Path("{runs}")
first = not (runs / "started").exists()
(runs / "started").touch()
beats = runs / f"run-{{time.time()}}-{{os.environ['PAI_CONTAINER_HOST_IP']}}"
until = time.time() + (120 if first else 1)
while time.time() < until:
    with open(beats, "a") as out:
        out.write(f"{{time.time()}}\\n")
    time.sleep(0.1)
EOF
"""


def test_a_cut_link_shows_the_node_unreachable_and_the_task_runs_again_without_overlap(
    sandbox: object, reset_platform: PaiUp, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with reset_platform.client() as client:
        client.submit(gpu_job("cut", {"main": (1, 2, HEARTBEAT.format(runs=runs))}))
        wait_until(lambda: len(list(runs.glob("run-*"))) == 1, "the task beats")
        worker = node_running(client, "cut")
        cut_at = time.time()
        sandbox.cut(worker)  # type: ignore[attr-defined]
        try:
            wait_until(
                lambda: engine_state(client, worker) == "unreachable", f"{worker} unreachable"
            )
            noticed = time.time() - cut_at
            node = next(node for node in client.nodes() if node.name == worker)
            [(_, task)] = client.job("cut").tasks()
            kubernetes = httpx.get(
                f"{reset_platform.url}/api/v2/kubernetes/nodes",
                headers={"Authorization": f"Bearer {client.token}"},
            ).json()
            shown = reset_platform.admin_cli(tmp_path).run("cluster")
            shown_job = reset_platform.admin_cli(tmp_path).run("job", "cut")
            with httpx.Client(base_url=reset_platform.url) as browser:
                assert send_login(browser, "admin", ADMIN_PASSWORD).status_code == 303
                portal = browser.get("/jobs/admin~cut").text
                portal_cluster = browser.get("/cluster").text
            job = client.wait("cut", timeout=WAIT, poll=0.3)
            # Ray's own notice, for comparison: the node gone from Ray's cluster.
            wait_until(lambda: engine_state(client, worker) == "gone", "Ray's notice")
            ray_noticed = time.time() - cut_at
        finally:
            sandbox.reconnect(worker)  # type: ignore[attr-defined]
        # Declared dead, the worker's raylet ends once it hears so: the machine starts Ray again.
        sandbox.stop_worker(worker)  # type: ignore[attr-defined]
        restore(sandbox, client, worker)
        attempts = client.job_attempts("cut")

    cut_run, retry_run = (
        beats.read_text().split() for beats in sorted(runs.glob("run-*"), key=lambda p: p.name)
    )
    stopped = float(cut_run[-1]) - cut_at
    retried = float(retry_run[0]) - cut_at
    overlap = float(cut_run[-1]) - float(retry_run[0])
    print(
        f"\ncut link: shown unreachable after {noticed:.1f} s, the cut run's last beat at "
        f"{stopped:.1f} s, the retry's first at {retried:.1f} s, overlap {overlap:.1f} s, "
        f"Ray's notice at {ray_noticed:.1f} s (PAI_RAY_NODE_TIMEOUT={NODE_TIMEOUT:g}, grace "
        f"10 s; Ray's health check: period 1 s, threshold 3, timeout 10 s)"
    )
    assert node.engine_message.startswith("unreachable since ")
    assert task.node_problem is not None and task.node_problem.startswith("unreachable since")
    [ready] = next(
        item["status"]["conditions"]
        for item in kubernetes["items"]
        if item["metadata"]["name"] == worker
    )
    assert (ready["status"], ready["reason"]) == ("False", "NodeUnreachable")
    assert ready["message"].startswith("unreachable since ")
    assert shown.returncode == 0 and "unreachable" in shown.stdout, shown.stderr
    assert "node unreachable since" in " ".join(shown_job.stdout.split()), shown_job.stderr
    assert "node unreachable since" in portal
    assert 'badge-bad">unreachable<' in portal_cluster
    assert f"{worker} does not answer" in portal_cluster
    assert noticed < NODE_TIMEOUT
    assert overlap < 0, "the retry started before the cut run had stopped"
    assert job.state == "SUCCEEDED"
    assert (job.job_status.retries, job.job_status.retry_details.platform) == (1, 1)
    lost = next(attempt for attempt in attempts if attempt.job_status.attempt_id == 0)
    assert lost.job_status.app_exit_code == -1001
    assert "unreachable since" in (lost.job_status.app_exit_diagnostics or "")


def engine_state(client: Client, name: str) -> str:
    return next(node.engine_state for node in client.nodes() if node.name == name)
