"""`HollowExecutor`: the control plane's agent engine over a fleet of hollow nodes."""

from __future__ import annotations

from pathlib import Path

from pai.cluster.model import ClusterConfig
from pai.executors.agents.executor import (
    DEFAULT_NODE_TIMEOUT,
    DEFAULT_POLL_TIMEOUT,
    DEFAULT_POLL_WAIT,
    AgentExecutor,
)
from pai.executors.hollow.fleet import HollowFleet
from pai.executors.node.taskfiles import SupervisorConfig
from pai.runtime.exitspec import ExitSpecSource


class HollowExecutor(AgentExecutor):
    """`AgentExecutor` over a `HollowFleet` of the cluster's nodes: the same links, calls,
    timeouts and give-ups as the Ray engine, with agents that run nothing."""

    def __init__(
        self,
        cluster: ClusterConfig,
        state_dir: Path,
        *,
        store_id: str,
        config: SupervisorConfig | None = None,
        exit_specs: ExitSpecSource | None = None,
        node_timeout: float = DEFAULT_NODE_TIMEOUT,
        loss: float = 0.0,
        loss_every: float = 60.0,
        seed: int | None = None,
        poll_interval: float = 0.1,
        poll_wait: float = DEFAULT_POLL_WAIT,
        poll_timeout: float = DEFAULT_POLL_TIMEOUT,
    ) -> None:
        """`state_dir`: where the copies of the tasks' logs go, and under which the tasks'
        (never created) working directories are named; `loss`, `loss_every`: see `HollowFleet`."""
        self.fleet = HollowFleet(
            cluster, node_timeout=node_timeout, loss=loss, loss_every=loss_every, seed=seed
        )
        super().__init__(
            cluster,
            state_dir,
            self.fleet,
            node_dir=state_dir.absolute() / "nodes",
            store_id=store_id,
            config=config,
            exit_specs=exit_specs,
            poll_interval=poll_interval,
            node_timeout=node_timeout,
            poll_wait=poll_wait,
            poll_timeout=poll_timeout,
        )
