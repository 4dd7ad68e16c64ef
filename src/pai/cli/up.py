"""`pai up`: the whole platform on this machine, in one process."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pai.cli.lease import hold_lease
from pai.cluster import ClusterConfigError, cluster_from_file, detect_local_cluster
from pai.cluster.model import ClusterConfig
from pai.diskfloor import room
from pai.errors import ConfigurationError
from pai.executors.hollow.cluster import hollow_cluster
from pai.executors.isolation.policy import IsolationError, resolve
from pai.executors.ray.nodes import (
    RayNode,
    cluster_from_ray,
    cluster_yaml_from_ray,
    match_nodes,
)
from pai.platform import ControllerRole, create_platform_app
from pai.server import build_server, settle_heap
from pai.server.logconfig import configure_logging
from pai.settings import Settings

DEFAULT_PORT = 9186
MOST_DEFAULT_API_WORKERS = 4
PR_SET_PDEATHSIG = 1
CLUSTER_FILE = "cluster.yaml"
"""The cluster file `pai up` last ran with, kept in `$PAI_HOME` so a restart uses it again."""

console = Console(stderr=True)


def up(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    home: Annotated[
        Path | None, typer.Option(help="State directory (default: $PAI_HOME or ~/.pai).")
    ] = None,
    cluster: Annotated[
        Path | None,
        typer.Option(
            help="Cluster file (HiveD format). Default: the last one used with this home, "
            "else this machine as a one-node cluster (with --engine ray: Ray's nodes)."
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="Where tasks run: 'local' (processes on this machine), 'ray' (the machines "
            "of a Ray cluster) or 'hollow' (emulated nodes that run nothing, see "
            "--hollow-nodes). Default: $PAI_ENGINE, else local."
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="The Ray cluster's head, HOST:PORT. Default: $PAI_RAY_ADDRESS."),
    ] = None,
    write_cluster: Annotated[
        Path | None,
        typer.Option(
            help="With --engine ray: write the cluster file that describes Ray's live nodes "
            "here, to start a cluster file of your own from (`pai up` also prints it when it "
            "runs without one)."
        ),
    ] = None,
    hollow_nodes: Annotated[
        int | None,
        typer.Option(
            min=1,
            show_default=False,
            help="With --engine hollow: emulate this many nodes (hollow-00001, ...; default: "
            "$PAI_HOLLOW_NODES), unless --cluster names them.",
        ),
    ] = None,
    hollow_gpus: Annotated[
        int | None, typer.Option(min=0, show_default=False, help="GPUs of each hollow node (8).")
    ] = None,
    hollow_cpus: Annotated[
        int | None,
        typer.Option(min=1, show_default=False, help="CPUs of each hollow node (8 per GPU)."),
    ] = None,
    hollow_memory_gb: Annotated[
        int | None,
        typer.Option(
            min=1, show_default=False, help="Memory of each hollow node, GiB (64 per GPU)."
        ),
    ] = None,
    hollow_loss: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            show_default=False,
            help="Share of hollow nodes that goes silent at a time, as behind a cut network "
            "(0: none).",
        ),
    ] = None,
    hollow_loss_every: Annotated[
        float | None,
        typer.Option(
            min=1,
            show_default=False,
            help="Seconds between two draws of silent hollow nodes, and how long each stays "
            "silent (60).",
        ),
    ] = None,
    api_workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            show_default=False,
            help="Processes that serve the API and the portal at --port, beside the "
            "controller's own process; 0 serves everything from one process. Default: one "
            f"per core of this machine, at most {MOST_DEFAULT_API_WORKERS}; 0 on a single core.",
        ),
    ] = None,
) -> None:
    """Start PAI here: the REST API, the portal, the controller and the engine that runs tasks.

    Ctrl-C stops the platform; running tasks keep running and the next `pai up` with the
    same home picks them up again.
    """
    hollow = {
        "hollow_nodes": hollow_nodes,
        "hollow_gpus": hollow_gpus,
        "hollow_cpus": hollow_cpus,
        "hollow_memory_gb": hollow_memory_gb,
        "hollow_loss": hollow_loss,
        "hollow_loss_every": hollow_loss_every,
    }
    settings, chosen, ray_nodes = prepare_controller(
        home,
        host,
        port,
        cluster,
        engine=engine,
        ray_address=ray_address,
        **{name: None if value is None else str(value) for name, value in hollow.items()},
    )
    if api_workers is None:
        api_workers = default_api_workers(len(os.sched_getaffinity(0)))
    # Without a cluster file given or kept, the cluster is Ray's nodes (`choose_cluster`).
    derived = cluster is None and not (settings.home / CLUSTER_FILE).exists()
    if write_cluster is not None:
        write_ray_cluster(write_cluster, ray_nodes)
    # With API workers, they take --port and the controller serves on a loopback port of its
    # own, where the workers reach it for task logs and wake it up after a submission.
    controller_port = free_loopback_port() if api_workers else port
    controller_host = "127.0.0.1" if api_workers else host
    address = f"http://{controller_host}:{controller_port}"
    log_path = settings.home / "pai.log"
    with open(log_path, "a", encoding="utf-8") as log_file, ExitStack() as running:
        configure_logging(settings.log_level, log_file)
        role = ControllerRole(
            address=address,
            wakeups=("127.0.0.1", controller_port) if api_workers else None,
            leadership=hold_lease(settings, address, console),
        )
        try:
            app = create_platform_app(settings, chosen, role=role)
        except ConfigurationError as problem:
            console.print(f"[red]error:[/red] {problem}")
            raise typer.Exit(1) from None
        _announce(host, port, settings, chosen, log_path, api_workers)
        if ray_nodes is not None:
            if derived:
                console.print("Cluster file described from Ray's nodes (--write-cluster FILE):")
                console.print(cluster_yaml_from_ray(ray_nodes), markup=False, highlight=False)
            console.print(ray_nodes_table(chosen, ray_nodes))
        if api_workers:
            running.enter_context(api_worker_processes(settings, host, port, api_workers))
        settle_heap()
        build_server(app, host=controller_host, port=controller_port).run()
    console.print("PAI stopped. Running tasks go on; `pai up` picks them up again.")


def default_api_workers(cores: int) -> int:
    """API workers for a machine with `cores` cores. One process spends one core on the API
    and the controller together; workers spread the API over the others, which takes in more
    submissions up to about one worker per core and nothing more past a few (docs/deploy.md
    has the figures). On a single core, more processes only take turns."""
    return 0 if cores < 2 else min(cores, MOST_DEFAULT_API_WORKERS)


def write_ray_cluster(path: Path, ray_nodes: list[RayNode] | None) -> None:
    """`--write-cluster`: the cluster file of Ray's live nodes, written to `path`."""
    if ray_nodes is None:
        console.print("[red]error:[/red] --write-cluster describes a Ray cluster: add --engine ray")
        raise typer.Exit(1)
    try:
        path.write_text(cluster_yaml_from_ray(ray_nodes), encoding="utf-8")
    except (OSError, ValueError) as problem:
        console.print(f"[red]error:[/red] --write-cluster {path}: {problem}")
        raise typer.Exit(1) from None
    console.print(f"Wrote the cluster file of Ray's nodes to {path}")


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def api_worker_processes(settings: Settings, host: str, port: int, workers: int) -> Iterator[None]:
    """`pai serve api` as a child process for as long as the block runs; the kernel stops it
    if this process dies first, so that a crashed `pai up` leaves no worker holding --port."""
    command = [sys.executable, "-c", "from pai.cli.main import app; app()", "serve", "api"]
    options = ["--host", host, "--port", str(port), "--workers", str(workers)]
    child = subprocess.Popen(
        [*command, *options, "--home", str(settings.home)], preexec_fn=_die_with_parent
    )
    try:
        yield
    finally:
        child.terminate()
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def prepare_controller(
    home: Path | None,
    host: str,
    port: int,
    cluster: Path | None,
    *,
    engine: str | None,
    ray_address: str | None,
    **hollow: str | None,
) -> tuple[Settings, ClusterConfig, list[RayNode] | None]:
    """What a controller starts with: its settings, its cluster and Ray's nodes (with the Ray
    engine); a problem is printed in one sentence and ends the command."""
    try:
        settings = load_settings(home, engine=engine, ray_address=ray_address, **hollow)
        check_port_free(host, port)
        ray_nodes = join_ray(settings, console) if settings.engine == "ray" else None
        if settings.engine == "hollow":
            return settings, choose_hollow_cluster(settings, cluster), None
        return settings, choose_cluster(settings.home, cluster, ray_nodes), ray_nodes
    except (ConfigurationError, ClusterConfigError, OSError, ValueError) as problem:
        console.print(f"[red]error:[/red] {problem}")
        raise typer.Exit(1) from None


def load_settings(home: Path | None, **options: str | None) -> Settings:
    environ = dict(os.environ)
    if home is not None:
        environ["PAI_HOME"] = str(home)
    for name, value in options.items():
        if value is not None:
            environ[f"PAI_{name.upper()}"] = value
    settings = Settings.from_env(environ)
    settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    # PAI's database, secret key and every task's files are in its home: for PAI alone.
    settings.home.chmod(0o700)
    return settings


def join_ray(settings: Settings, console: Console) -> list[RayNode]:
    """Join the Ray cluster as this process's driver and read its nodes."""
    try:
        from pai.executors.ray.executor import RayEngineError, connect
    except ImportError:
        raise ConfigurationError(
            "--engine ray needs Ray on this machine: pip install 'pai[ray]'"
        ) from None
    assert settings.ray_address is not None  # Settings checks it
    console.print(f"Joining the Ray cluster at {settings.ray_address} ...")
    try:
        return connect(settings.ray_address, settings.ray_namespace)
    except RayEngineError as error:
        raise ConfigurationError(str(error)) from None


def choose_cluster(
    home: Path, given: Path | None, ray_nodes: list[RayNode] | None
) -> ClusterConfig:
    """The cluster file given (kept for the next start), else the one kept, else what the
    engine has: this machine, or Ray's live nodes."""
    kept = home / CLUSTER_FILE
    if given is not None:
        config = cluster_from_file(given)  # validate before replacing the kept copy
        if given.resolve() != kept.resolve():
            shutil.copyfile(given, kept)
        return config
    if kept.exists():
        return cluster_from_file(kept)
    if ray_nodes is not None:
        return cluster_from_ray(ray_nodes)
    return detect_local_cluster()


def choose_hollow_cluster(settings: Settings, given: Path | None) -> ClusterConfig:
    """The cluster file given (every node of it hollow), else `settings.hollow_nodes` hollow
    nodes of the size the settings say (a kept cluster file is not used: the hollow engine's
    size is what each start asks for)."""
    if given is not None:
        return choose_cluster(settings.home, given, None)
    if not settings.hollow_nodes:
        raise ConfigurationError(
            "--engine hollow needs --hollow-nodes N (or PAI_HOLLOW_NODES), or a cluster file "
            "whose nodes it emulates (--cluster)"
        )
    return hollow_cluster(
        settings.hollow_nodes,
        gpus=settings.hollow_gpus,
        cpus=settings.hollow_cpus,
        memory_gb=settings.hollow_memory_gb,
    )


def ray_nodes_table(cluster: ClusterConfig, ray_nodes: list[RayNode]) -> Table:
    """Each node of the cluster file against Ray's: what PAI may use, and why not."""
    table = Table(title="Nodes in the Ray cluster", show_edge=False)
    for column in ("node", "address", "state", "Ray reports"):
        table.add_column(column)
    matches = match_nodes(cluster, ray_nodes)
    for spec in cluster.nodes:
        match = matches[spec.name]
        reported = match.ray_node.describe() if match.ray_node else "-"
        state = match.state.condition.value
        table.add_row(spec.name, spec.address, state, match.state.message or reported)
    return table


def check_port_free(host: str, port: int) -> None:
    """Refuse to start when something listens on `host:port`.

    The probe binds as the server will (with SO_REUSEADDR, as any server does), so connections
    a killed PAI left behind in TIME_WAIT or FIN_WAIT do not hold the port: a restart right
    after a crash succeeds, while a live listener still gets the clear message.
    """
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise OSError(
                f"cannot listen on {host}:{port} ({error.strerror}); is PAI already running? "
                "Choose another port with --port"
            ) from None


def _engine_line(settings: Settings) -> str:
    if settings.engine == "ray":
        return f"ray, cluster at {settings.ray_address}, node directory {settings.ray_node_dir}"
    if settings.engine == "hollow":
        loss = (
            f", {settings.hollow_loss:.0%} of them silent at a time" if settings.hollow_loss else ""
        )
        return f"hollow (emulated nodes that run nothing{loss})"
    return "local (tasks run on this machine)"


def _nodes_line(cluster: ClusterConfig, most: int = 8) -> str:
    """The nodes, or the first and last of them when they are more than `most`."""
    named = [f"{node.name} ({node.address})" for node in cluster.nodes]
    if len(named) <= most:
        return ", ".join(named)
    return f"{len(named)} nodes: {', '.join(named[: most - 1])}, ..., {named[-1]}"


def _tasks_line(settings: Settings) -> str:
    """Where tasks run: what this machine decided, or the policy every Ray node applies."""
    policy = settings.isolation_policy
    if settings.engine == "ray":
        return f"isolation {policy.mode} on every node (`pai cluster` shows each node's)"
    if settings.engine == "hollow":
        return "nothing runs: a task lasts as its first `sleep` says, then ends with its `exit`"
    try:
        return resolve(policy).describe()
    except IsolationError as error:
        return str(error)


def _api_line(api_workers: int) -> str:
    if api_workers == 0:
        return "served by this process with the controller (--api-workers)"
    return f"{api_workers} worker processes beside the controller's (--api-workers)"


def _announce(
    host: str,
    port: int,
    settings: Settings,
    cluster: ClusterConfig,
    log_path: Path,
    api_workers: int,
) -> None:
    url = f"http://{host}:{port}"
    table = Table(title="Virtual clusters", show_edge=False)
    for column in ("VC", "guaranteed cells", "pinned cells"):
        table.add_column(column)
    for name, vc in cluster.virtual_clusters.items():
        cells = ", ".join(f"{cell.number} x {cell.cell_type}" for cell in vc.virtual_cells)
        table.add_row(name, cells or "-", ", ".join(vc.pinned_cells) or "-")
    console.print(f"[bold]PAI[/bold] is starting at [link={url}]{url}[/link]")
    console.print(f"  home:    {settings.home}")
    home_room = room(settings.home, settings.disk_floor)
    console.print(f"  room:    {home_room.describe()}", style="red" if home_room.short else None)
    console.print(f"  engine:  {_engine_line(settings)}")
    console.print(f"  tasks:   {_tasks_line(settings)}")
    console.print(f"  nodes:   {_nodes_line(cluster)}")
    console.print(f"  api:     {_api_line(api_workers)}")
    console.print(f"  log:     {log_path}")
    console.print(f"  metrics: {url}/metrics (open to this machine; see docs/monitoring.md)")
    console.print(table)
    console.print(
        f"Log in at {url}/ as 'admin' (or: pai login --server {url} --username admin).\n"
        "Press Ctrl-C to stop.",
    )
    sys.stderr.flush()
