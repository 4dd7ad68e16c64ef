"""What one replay produces: every job's times, and the cluster's use integrated over time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One finished job. `start_s` is when it first ran; `preemptions` how often it was stopped
    to give its cells back (each time it was retried from scratch); `opportunistic` whether it
    ever ran as an opportunistic job; `user` the trace's (None: unknown); `run_s` how long it
    runs when nothing stops it (the trace's duration)."""

    job_id: str
    vc: str
    gpus: int
    submit_s: float
    start_s: float
    end_s: float
    preemptions: int = 0
    opportunistic: bool = False
    user: str | None = None
    run_s: float = 0.0

    @property
    def queuing_delay_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def completion_time_s(self) -> float:
        return self.end_s - self.submit_s


@dataclass
class ReplayResult:
    """The outcome of replaying one trace through one policy on one cluster.

    GPU-seconds are integrals over the replay's window (first submission to last completion):
    `allocated` of GPUs held by jobs; `idle_while_waiting` of free GPUs while some job waited;
    `fragmented` of free GPUs on nodes with fewer free GPUs than the smallest waiting pod, i.e.
    free but unusable by any waiting job; `preempted` of GPUs held by attempts that were then
    preempted and not saved by a checkpoint (work lost). Per VC: `vc_idle_while_waiting` counts
    free GPUs while a job of that VC waited, `vc_preempted` the work its jobs lost.
    `allocation_series` samples GPUs held over time.
    """

    policy: str
    cluster: str
    gpus: int
    quota_gpus: dict[str, int]
    jobs: list[JobRecord] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    unfinished: dict[str, int] = field(default_factory=dict)
    start_s: float = 0.0
    end_s: float = 0.0
    allocated_gpu_seconds: float = 0.0
    vc_allocated_gpu_seconds: dict[str, float] = field(default_factory=dict)
    idle_while_waiting_gpu_seconds: float = 0.0
    vc_idle_while_waiting_gpu_seconds: dict[str, float] = field(default_factory=dict)
    vc_preempted_gpu_seconds: dict[str, float] = field(default_factory=dict)
    fragmented_gpu_seconds: float = 0.0
    preempted_gpu_seconds: float = 0.0
    allocation_series: tuple[list[float], list[int]] = field(default_factory=lambda: ([], []))
    decisions: int = 0
    events: int = 0
    wall_seconds: float = 0.0

    @property
    def makespan_s(self) -> float:
        return max(self.end_s - self.start_s, 0.0)
