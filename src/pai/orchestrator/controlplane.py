"""What the API and the portal need of the controller, whether it runs in their process (`pai
up`) or in another one (`pai serve api` beside `pai serve controller`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pai.auth.sealing import SecretBox
from pai.cluster.model import ClusterConfig
from pai.executors.base import NodeState
from pai.orchestrator.controller import VcJobs
from pai.orchestrator.fairness import FairnessState
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.types import ClusterSnapshot


class ControlPlane(Protocol):
    """The cluster and its state after the controller's last pass, and a way to ask for the
    next pass now (a submission or a stop was recorded)."""

    @property
    def cluster(self) -> ClusterConfig: ...

    @property
    def secret_box(self) -> SecretBox: ...

    @property
    def exit_specs(self) -> ExitSpecSource: ...

    def snapshot(self) -> ClusterSnapshot: ...

    def vc_jobs(self) -> Mapping[str, VcJobs]: ...

    def node_states(self) -> Mapping[str, NodeState]: ...

    def fairness(self) -> FairnessState: ...

    def wake(self) -> None: ...
