"""Sharing a VC between its users through the controller, with a real store and real processes:
limits per user hold jobs back (and let them go), fair share orders the queue.

The cluster is four CPU "nodes" on this machine; the `default` VC has three of them (12 CPU
slots), each job below asks for slots with `cpu`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_controller import Platform, job, own_sleep

from pai.cluster import ClusterConfig, cluster_from_yaml
from pai.executors.local import kill_processes_under
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.orchestrator.framework import Backoff
from pai.platform import open_engine
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.pai import PaiScheduler
from pai.scheduler.scheduler import Scheduler
from pai.settings import Settings
from pai.store.models import Group, User
from pai.store.userlimits import set_group_limit

CLUSTER = Path(__file__).parents[2] / "examples" / "clusters" / "local-4node.yaml"


def cluster_with(user_limit: str = "") -> ClusterConfig:
    """The four-node example, the `default` VC with `userLimit: {<user_limit>}`."""
    text = CLUSTER.read_text()
    if user_limit:
        text = text.replace(
            "    - {cellType: CPU-NODE, cellNumber: 3}\n",
            f"    - {{cellType: CPU-NODE, cellNumber: 3}}\n    userLimit: {{{user_limit}}}\n",
        )
    return cluster_from_yaml(text)


def sleeper(name: str, cpus: int = 1, instances: int = 1, **extra: str) -> str:
    text = job(name, [f"sleep {own_sleep(300)}"], **extra)
    text = text.replace("cpu: 1, memoryMB: 256", f"cpu: {cpus}, memoryMB: 256")
    image = "    dockerImage: image\n"
    return text.replace(image, f"    instances: {instances}\n{image}")


def wait_reason(platform: Platform, name: str, timeout: float = 30) -> dict[str, Any]:
    """The job's wait reason, once the controller gave one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reason = platform.job(name).wait_reason
        if reason is not None:
            return reason
        time.sleep(0.05)
    raise AssertionError(f"{name} got no wait reason in {timeout}s ({platform.job(name).state})")


class PolicyPlatform(Platform):
    """The platform with a given scheduler and fair share setting."""

    def __init__(
        self,
        home: Path,
        cluster: ClusterConfig,
        *,
        overflow: bool = False,
        fair_share_half_life: float | None = 3600.0,
    ) -> None:
        self.overflow = overflow
        self.fair_share_half_life = fair_share_half_life
        super().__init__(home, cluster)

    def _controller(self) -> Controller:
        settings = Settings(self.home, self.database_url, isolation="host", task_user="")
        engine = open_engine(settings, self.cluster, ExitSpecSource(), self.database)
        scheduler = PaiScheduler(self.cluster) if self.overflow else Scheduler(self.cluster)
        return Controller(
            self.database,
            scheduler,
            engine.executor,
            self.box,
            ControllerSettings(
                poll_interval=0.05,
                backoff=Backoff(1, 2),
                fair_share_half_life=self.fair_share_half_life,
            ),
        )


@contextmanager
def platform_of(home: Path, cluster: ClusterConfig, **options: object) -> Iterator[Platform]:
    platform = PolicyPlatform(home, cluster, **options)  # type: ignore[arg-type]
    platform.controller.start()
    try:
        yield platform
    finally:
        platform.controller.stop()
        kill_processes_under(home)
        platform.database.dispose()


def test_a_job_past_its_users_limit_waits_and_starts_when_the_users_other_job_ends(
    tmp_path: Path,
) -> None:
    with platform_of(tmp_path, cluster_with("cpus: 2, jobs: 2")) as limited:
        check_limit_waits_then_starts(limited)


def check_limit_waits_then_starts(limited: Platform) -> None:
    first = limited.submit(sleeper("first", cpus=2))
    limited.wait(first, {"RUNNING"})
    second = limited.submit(sleeper("second"))
    others = limited.submit(sleeper("others", cpus=2), user="bob")
    limited.wait(others, {"RUNNING"})  # bob has a limit of his own
    reason = wait_reason(limited, second)
    assert reason["kind"] == "user_limit"
    assert reason["message"].startswith(
        "alice uses 2 of the 2 CPUs a user may have in VC 'default'; this job needs 1 CPUs."
    )
    assert limited.job(second).state == "WAITING"
    limited.stop(first)
    limited.wait(second, {"RUNNING"})
    shares = {share.user: share for share in limited.controller.fairness().vcs["default"]}
    assert (shares["alice"].cpus, shares["alice"].jobs) == (1, 1)
    assert (shares["bob"].cpus, shares["bob"].jobs) == (2, 1)


def test_an_administrators_group_limit_replaces_the_default_and_takes_effect_at_once(
    tmp_path: Path,
) -> None:
    with platform_of(tmp_path, cluster_with("cpus: 2, jobs: 2")) as limited:
        check_group_limit(limited)


def check_group_limit(limited: Platform) -> None:
    first = limited.submit(sleeper("first", cpus=2))
    limited.wait(first, {"RUNNING"})
    second = limited.submit(sleeper("second", cpus=2))
    assert wait_reason(limited, second)["kind"] == "user_limit"
    with limited.database.session() as session:
        group = Group(groupname="power", virtual_clusters=["default"])
        session.add(User(username="alice", password_hash="", groups=[group]))
        session.flush()
        set_group_limit(session, group, "default", gpus=None, cpus=8, jobs=None, set_by="admin")
    limited.controller.wake()
    limited.wait(second, {"RUNNING"})
    assert limited.controller.fairness().vcs["default"][0].cpus == 4


def test_opportunistic_jobs_neither_count_nor_wait_for_the_limit(tmp_path: Path) -> None:
    with platform_of(tmp_path, cluster_with("jobs: 1"), overflow=True) as platform:
        first = platform.submit(sleeper("first"))
        platform.wait(first, {"RUNNING"})
        oppo = platform.submit(sleeper("oppo", extras="{hivedScheduler: {jobPriorityClass: oppo}}"))
        overflow = platform.submit(sleeper("overflow"))
        platform.wait(oppo, {"RUNNING"})
        # past the limit, a guaranteed job of the `pai` policy runs on idle cells instead
        platform.wait(overflow, {"RUNNING"})
        allocation = platform.job(overflow).allocations[0]
        assert all(pod["cellType"] is None for pod in allocation["placement"]["pods"])
        alice = platform.controller.fairness().vcs["default"][0]
        assert (alice.jobs, alice.cpus, alice.gpus_held) == (1, 1, 3)


def run_fair_share_race(platform: Platform) -> tuple[str, str]:
    """alice fills the VC, then queues a VC-sized job; bob, who used nothing, queues one after
    hers. Which of the two starts when alice's first job ends?"""
    filler = platform.submit(sleeper("filler", cpus=4, instances=3))
    platform.wait(filler, {"RUNNING"})
    alices = platform.submit(sleeper("next", cpus=4, instances=3))
    assert wait_reason(platform, alices)["kind"] == "vc_quota"
    bobs = platform.submit(sleeper("first", cpus=4, instances=3), user="bob")
    assert wait_reason(platform, bobs)["kind"] == "vc_quota"
    platform.stop(filler)
    platform.wait(filler, {"STOPPED"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = {name: platform.job(name).state for name in (alices, bobs)}
        running = [name for name, state in states.items() if state == "RUNNING"]
        if running:
            waiting = [name for name in states if name not in running]
            assert len(running) == 1 and platform.job(waiting[0]).state == "WAITING"
            return running[0], waiting[0]
        time.sleep(0.05)
    raise AssertionError(f"neither job started: {states}")


def test_with_fair_share_the_user_with_less_recent_use_goes_first(tmp_path: Path) -> None:
    with platform_of(tmp_path, cluster_with()) as platform:
        assert run_fair_share_race(platform) == ("bob~first", "alice~next")
        shares = platform.controller.fairness().vcs["default"]
        recent = {share.user: share.recent_gpu_seconds for share in shares}
        assert recent["alice"] > recent.get("bob", 0.0)


def test_without_fair_share_the_first_come_goes_first(tmp_path: Path) -> None:
    with platform_of(tmp_path, cluster_with(), fair_share_half_life=None) as platform:
        assert run_fair_share_race(platform) == ("alice~next", "bob~first")


GPU_CLUSTER = """\
physicalCluster:
  skuTypes:
    GPU: {gpu: 1, cpu: 1, memory: 1Gi}
  cellTypes:
    GPU-NODE: {childCellType: GPU, childCellNumber: 8, isNodeLevel: true}
  physicalCells:
  - {cellType: GPU-NODE, cellAddress: gpu-node, nodeAddress: 127.0.0.1}
virtualClusters:
  default:
    virtualCells: [{cellType: GPU-NODE, cellNumber: 1}]
"""
"""One node declaring 8 GPUs (tasks are only given their indices: no GPU is needed)."""


def test_recent_use_is_restored_from_the_store_after_a_restart(tmp_path: Path) -> None:
    with platform_of(tmp_path, cluster_from_yaml(GPU_CLUSTER)) as platform:
        text = sleeper("busy").replace("gpu: 0", "gpu: 4")
        name = platform.submit(text)
        platform.wait(name, {"RUNNING"})
        time.sleep(1.0)
        platform.stop(name)
        platform.wait(name, {"STOPPED"})
        before = platform.controller.fairness().vcs["default"][0].recent_gpu_seconds
        platform.restart()
        after = platform.controller.fairness().vcs["default"]
    assert before >= 4.0  # 4 GPUs for a second or more
    assert [share.user for share in after] == ["alice"]
    assert after[0].recent_gpu_seconds == pytest.approx(before, rel=0.5)
