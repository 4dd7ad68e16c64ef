"""Monitoring: what jobs, VCs and the cluster use over time, alerts, cordoned nodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from pai.sdk.base import ApiBase
from pai.sdk.model import ApiModel
from pai.sdk.names import segment


class UsagePoint(ApiModel):
    at: datetime
    cpu_percent: float | None = None
    memory_bytes: int | None = None
    memory_limit_bytes: int | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    gpu_percent: float | None = None
    gpu_memory_percent: float | None = None
    used: float | None = None
    total: float | None = None


class UsageSeries(ApiModel):
    """Samples of one task (or of a VC, or of the cluster), oldest first."""

    scope: str
    name: str
    task_role_name: str | None = None
    task_index: int | None = None
    node: str | None = None
    points: list[UsagePoint] = Field(default_factory=list)


class AlertAction(ApiModel):
    action: str
    target: str
    status: str
    message: str = ""
    at: datetime | None = None


class Alert(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    status: dict[str, Any] = Field(default_factory=dict)
    actions: list[AlertAction] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def firing(self) -> bool:
        return self.status.get("state") == "active"


class MonitoringApi(ApiBase):
    def job_usage(self, name: str) -> list[UsageSeries]:
        """CPU, memory, disk and GPU use of each task of the job, over the job's life."""
        path = f"/jobs/{segment(self._framework_name(name))}/usage"
        return [UsageSeries.model_validate(series) for series in self._transport.get(path)]

    def cluster_usage(self, vc: str | None = None, hours: float = 24) -> list[UsageSeries]:
        """Cells in use over the last `hours`: the whole cluster's, or one VC's."""
        params: dict[str, str | int] = {"hours": f"{hours:g}"}
        if vc is not None:
            params["vc"] = vc
        body = self._transport.get("/cluster/usage", params=params)
        return [UsageSeries.model_validate(series) for series in body]

    def alerts(self, state: str = "firing") -> list[Alert]:
        """Alerts (firing, resolved or all), newest first, with the actions they caused."""
        body = self._transport.get("/alerts", params={"state": state})
        return [Alert.model_validate(alert) for alert in body]

    def monitoring_token(self) -> str:
        """What Prometheus and Alertmanager send to PAI (administrators only)."""
        return str(self._transport.get("/monitoring/token")["token"])

    def cordon(self, node: str, reason: str = "") -> str:
        """Place nothing new on the node until it is uncordoned (administrators only)."""
        path = f"/cluster/nodes/{segment(node)}/cordon"
        return str(self._transport.send("PUT", path, {"reason": reason})["message"])

    def uncordon(self, node: str) -> str:
        path = f"/cluster/nodes/{segment(node)}/cordon"
        return str(self._transport.send("DELETE", path)["message"])
