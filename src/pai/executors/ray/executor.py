"""The Ray engine's fleet: PAI's agents as detached Ray actors, one pinned to each node.

An agent is a detached actor named after the store, the node and its Ray node id, pinned there
with hard node affinity, so a restarted control plane finds it again by name. Ray runs one
caller's calls to an actor in order, which is what `AgentExecutor` needs of a fleet, except
polls: they run in a concurrency group of their own, so that a poll the agent holds keeps no
launch or stop waiting. Each answer is handed over by a callback as it arrives, so collecting
them costs nothing per call still outstanding (every node has a poll outstanding). A
cluster-file node is a live Ray node with its address (or name), as large as the cluster file
says (`.nodes`). `RayExecutor` is `AgentExecutor` over this fleet; `connect()` first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pai.cluster.model import ClusterConfig
from pai.executors.agents.executor import (
    DEFAULT_NODE_TIMEOUT,
    DEFAULT_POLL_TIMEOUT,
    DEFAULT_POLL_WAIT,
    AgentExecutor,
)
from pai.executors.agents.fleet import Handler, Member
from pai.executors.node.taskfiles import SupervisorConfig
from pai.executors.ray.agent import NodeAgent
from pai.executors.ray.nodes import RayNode, match_nodes, unlisted_nodes
from pai.runtime.exitspec import ExitSpecSource

log = logging.getLogger(__name__)

AGENT_PREFIX = "pai-agent"
POLLS = "polls"
"""The agent's concurrency group that runs its polls, one at a time."""

# Ray's type hints lack the (documented) concurrency groups of a class.
_AgentActor = ray.remote(concurrency_groups={POLLS: 1})(NodeAgent)  # type: ignore[call-overload]


class RayEngineError(RuntimeError):
    """The Ray cluster cannot be reached or used; the message says what to check."""


def connect(address: str, namespace: str) -> list[RayNode]:
    """Join the Ray cluster at `address` as this process's driver; its nodes as Ray lists them."""
    try:
        ray.init(
            address=address,
            namespace=namespace,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RayEngineError(
            f"cannot join the Ray cluster at {address}: {error}. Is `ray start --head` running "
            "there, is this machine a node of it, and do RAY_AUTH_MODE and RAY_AUTH_TOKEN match "
            "the cluster's?"
        ) from None
    return ray_nodes()


def ray_nodes() -> list[RayNode]:
    return [RayNode.from_ray(info) for info in ray.nodes()]


class RayFleet:
    """The `Fleet` of a Ray cluster (see the module docstring)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        node_dir: Path,
        store_id: str,
        config: SupervisorConfig,
        usage_interval: float,
        node_timeout: float,
    ) -> None:
        """`node_dir`: this store's directory on every node (`<node dir>/<store id>`)."""
        self._cluster = cluster
        self._node_dir = node_dir
        self._store_id = store_id
        self._config = config
        self._usage_interval = usage_interval
        self._node_timeout = node_timeout
        self._unlisted: set[str] = set()  # Ray nodes outside the cluster, named in the log
        self._arrived = threading.Condition()
        self._answers: list[tuple[Handler, Any]] = []  # arrived, not yet collected

    def members(self) -> Mapping[str, Member]:
        nodes = ray_nodes()
        self._name_unlisted(nodes)
        return {
            name: Member(
                match.state,
                None if match.ray_node is None else match.ray_node.node_id,
                "" if match.ray_node is None else match.ray_node.address,
            )
            for name, match in match_nodes(self._cluster, nodes).items()
        }

    def start_agent(self, node: str, instance: str) -> Any:
        agent = _AgentActor.options(
            name=f"{AGENT_PREFIX}:{self._store_id}:{node}:{instance[:16]}",
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_restarts=-1,
            scheduling_strategy=NodeAffinitySchedulingStrategy(instance, soft=False),
        ).remote(
            node,
            str(self._node_dir),
            self._config.to_dict(),
            self._usage_interval,
            self._node_timeout,
        )
        return agent

    def call(self, agent: Any, method: str, args: tuple[Any, ...], on_answer: Handler) -> None:
        remote = getattr(agent, method)
        if method == "poll":
            remote = remote.options(concurrency_group=POLLS)
        future = remote.remote(*args).future()
        future.add_done_callback(lambda done: self._arrive(on_answer, done))

    def answers(self, timeout: float) -> list[tuple[Handler, Any]]:
        with self._arrived:
            if not self._answers:
                self._arrived.wait(timeout)
            answered, self._answers = self._answers, []
        return answered

    def _arrive(self, handler: Handler, done: Future[Any]) -> None:
        """Keep an answer for `answers` (in a thread of Ray's)."""
        try:
            answer = done.result()
        except Exception as error:  # the call's own exception, or Ray's about the actor
            answer = error
        with self._arrived:
            self._answers.append((handler, answer))
            self._arrived.notify()

    def close(self) -> None:
        """Leave the Ray cluster (the agents and their tasks go on)."""
        ray.shutdown()

    def _name_unlisted(self, nodes: list[RayNode]) -> None:
        """Say once which Ray node PAI leaves unused because its cluster does not have it."""
        for node in unlisted_nodes(self._cluster, nodes):
            if node.node_id not in self._unlisted:
                self._unlisted.add(node.node_id)
                log.warning(
                    "Ray node %s (%s, %s) is not in PAI's cluster, and takes no tasks: add it "
                    "to the cluster file, or restart PAI without one (`pai up` describes the "
                    "live Ray nodes again)",
                    node.name,
                    node.address,
                    node.describe(),
                )


class RayExecutor(AgentExecutor):
    """The `Executor` of the Ray engine: `AgentExecutor` over a `RayFleet`."""

    def __init__(
        self,
        cluster: ClusterConfig,
        state_dir: Path,
        *,
        node_dir: Path,
        store_id: str,
        config: SupervisorConfig | None = None,
        exit_specs: ExitSpecSource | None = None,
        poll_interval: float = 0.1,
        node_refresh_interval: float = 1.0,
        usage_interval: float = 5.0,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        poll_timeout: float = DEFAULT_POLL_TIMEOUT,
        poll_wait: float = DEFAULT_POLL_WAIT,
    ) -> None:
        """See `AgentExecutor`; `usage_interval`: how often agents sample what is used."""
        config = config or SupervisorConfig()
        fleet = RayFleet(
            cluster,
            node_dir=node_dir / store_id,
            store_id=store_id,
            config=config,
            usage_interval=usage_interval,
            node_timeout=node_timeout,
        )
        super().__init__(
            cluster,
            state_dir,
            fleet,
            node_dir=node_dir,
            store_id=store_id,
            config=config,
            exit_specs=exit_specs,
            poll_interval=poll_interval,
            node_refresh_interval=node_refresh_interval,
            node_timeout=node_timeout,
            poll_timeout=poll_timeout,
            poll_wait=poll_wait,
        )
