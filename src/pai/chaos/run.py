"""A whole chaos run: build the cluster, storm it while users submit, let it settle, collect,
check, and say what each fault cost.

    report = run_chaos(minutes=3, seed=1, root=Path(tempfile.mkdtemp(dir="/tmp")))
    assert report.violations == []

After the storm (`minutes`), no new job is submitted and no new fault starts; the faults under
way are undone, every host is made to run Ray again, and the run waits up to `SETTLE_SECONDS`
for every job to end before it looks at what the store and the hosts show.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pai.chaos.checker import Violation, check
from pai.chaos.cluster import ADMIN_PASSWORD, NODE_TIMEOUT, WORKERS, ChaosCluster
from pai.chaos.collect import final_jobs, host_remnants, read_runs
from pai.chaos.faults import FaultRunner, Injectors
from pai.chaos.history import Fault, FinalJob, History, Record, Run, Submission
from pai.chaos.schedule import plan
from pai.chaos.workload import CLI_USER, PASSWORD, SDK_USERS, CliUser, SdkUser, User
from pai.sdk import Client

SETTLE_SECONDS = 300.0
MEAN_GAP_PER_USER = 8.0
"""Seconds between one user's submissions, on average."""


@dataclass(frozen=True)
class FaultCost:
    """What the faults of one kind cost: how many, how long from break to recovery (mean and
    most), and the task-seconds of runs they killed."""

    fault: str
    count: int
    mean_recovery: float
    max_recovery: float
    runs_killed: int
    work_lost: float


@dataclass
class ChaosReport:
    seed: int
    minutes: float
    history: Path
    faults: list[FaultCost]
    jobs: dict[str, Counter[str]]
    """Per job kind: how many ended in each state."""
    violations: list[Violation]
    problems: list[str] = field(default_factory=list)
    """What went wrong with the run itself (a fault that could not be undone, a stop refused)."""
    seconds: float = 0.0
    ssh_sessions: int = 0
    """Logins over SSH to interactive jobs, each followed by a command run there."""

    def as_dict(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "minutes": self.minutes,
            "seconds": round(self.seconds, 1),
            "history": str(self.history),
            "faults": [cost.__dict__ for cost in self.faults],
            "fault_count": sum(cost.count for cost in self.faults),
            "jobs": {kind: dict(states) for kind, states in self.jobs.items()},
            "job_count": sum(sum(states.values()) for states in self.jobs.values()),
            "violations": [str(violation) for violation in self.violations],
            "problems": self.problems,
            "ssh_sessions": self.ssh_sessions,
        }


def run_chaos(minutes: float, seed: int, root: Path, settle: float = SETTLE_SECONDS) -> ChaosReport:
    began = time.time()
    history = History(root / "history.jsonl")
    cluster = ChaosCluster(root)
    try:
        cluster.start()
        urls = [worker.url for worker in cluster.api_workers]
        with Client.login(urls[0], "admin", ADMIN_PASSWORD) as admin:
            for name in (*SDK_USERS, CLI_USER):
                admin.create_user(name, PASSWORD)
            _wait_hosts_alive(admin, time.monotonic() + 180)
        cluster.mount_host_disks()
        people = {name: SdkUser(name, urls, history, root / "keys") for name in SDK_USERS}
        cli = CliUser(CLI_USER, urls, root / "cli")
        started = time.time()
        until = started + minutes * 60
        everyone: list[tuple[str, SdkUser | CliUser]] = [*people.items(), (CLI_USER, cli)]
        users = [
            User(name, person, history, cluster.runs, seed * 100 + number, until,
                 MEAN_GAP_PER_USER)
            for number, (name, person) in enumerate(everyone)
        ]  # fmt: skip
        faults = FaultRunner(Injectors(cluster), plan(seed, minutes * 60), history, started)
        parts = [faults.run, *(user.run for user in users)]
        threads = [threading.Thread(target=part, daemon=True) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        problems = [*faults.failures, *(p for user in users for p in user.problems)]
        ssh_sessions = sum(user.ssh_sessions for user in users)
        with Client.login(urls[0], "admin", ADMIN_PASSWORD) as admin:
            _bring_hosts_back(cluster, admin)
            _wait_jobs_ended(admin, time.monotonic() + settle)
            finals = final_jobs(admin)
        for person in people.values():
            person.close()
        for record in [*read_runs(cluster.runs), *finals, *_remnants(cluster, finals)]:
            history.add(record)
    finally:
        cluster.close()
    records = history.records()
    return ChaosReport(
        seed,
        minutes,
        history.path,
        fault_costs(records, {host: cluster.host_address(host) for host in WORKERS}),
        jobs_by_kind(records),
        check(records),
        problems,
        time.time() - began,
        ssh_sessions,
    )


def _bring_hosts_back(cluster: ChaosCluster, admin: Client) -> None:
    """Every host running Ray and alive in PAI again, as an operator would leave them after the
    storm: Ray started again where it is gone, and where Ray has dropped the host meanwhile."""
    for host in WORKERS:
        cluster.ensure_ray(host)
    try:
        _wait_hosts_alive(admin, time.monotonic() + 60)
    except TimeoutError:
        for node in admin.nodes():
            if node.engine_state != "alive":
                cluster.restart_ray(node.name)
        _wait_hosts_alive(admin, time.monotonic() + 180)


def _wait_hosts_alive(admin: Client, deadline: float) -> None:
    while {n.name for n in admin.nodes() if n.engine_state == "alive"} != set(WORKERS):
        if time.monotonic() > deadline:
            shown = {n.name: f"{n.engine_state}: {n.engine_message}" for n in admin.nodes()}
            raise TimeoutError(f"the hosts did not all come back alive in PAI: {shown}")
        time.sleep(1)


def _wait_jobs_ended(admin: Client, deadline: float) -> None:
    while time.monotonic() < deadline:
        if all(job.state in ("SUCCEEDED", "FAILED", "STOPPED") for job in admin.jobs(limit=50000)):
            return
        time.sleep(2)


def _remnants(cluster: ChaosCluster, finals: list[FinalJob]) -> list[Record]:
    known = {final.job for final in finals}
    found: list[Record] = []
    for host in WORKERS:
        node_dirs = list(cluster.node_dir.glob(f"*/{host}"))
        found += host_remnants(
            host, cluster.host_address(host), cluster.sandbox.namespace(host), node_dirs, known
        )
    return found


def jobs_by_kind(records: list[Record]) -> dict[str, Counter[str]]:
    finals = {r.job: r.state for r in records if isinstance(r, FinalJob)}
    counted: dict[str, Counter[str]] = defaultdict(Counter)
    for submission in records:
        if isinstance(submission, Submission):
            counted[submission.workload][finals.get(submission.job, "ABSENT")] += 1
    return dict(counted)


HOST_FAULTS = ("agent-kill", "host-loss", "link-cut")
CONTROL_PLANE_FAULTS = ("controller-kill", "store-stop")
"""Faults that stop runs on every host if they last past `PAI_RAY_NODE_TIMEOUT` (the agents
then fence their tasks), not before. An API worker's loss or a full disk stops no run."""


def fault_costs(records: list[Record], hosts: dict[str, str]) -> list[FaultCost]:
    """Per fault kind. A run that was killed (it never said how it ended) and was not stopped by
    its user is charged to the latest fault before its last beat that could have killed it: one
    of its own host, or one of the control plane. `hosts`: each host's address."""
    faults = sorted((r for r in records if isinstance(r, Fault)), key=lambda f: f.start)
    stopped = {
        r.job for r in records if isinstance(r, Submission) and r.expected_state == "STOPPED"
    }
    killed: dict[str, list[Run]] = defaultdict(list)
    for run in records:
        if not isinstance(run, Run) or run.exit_code is not None or run.job in stopped:
            continue
        culprits = [
            fault
            for fault in faults
            if (
                fault.fault in HOST_FAULTS
                and hosts.get(fault.target) == run.host
                and fault.start <= run.end + 1
            )
            # The control plane's absence stops runs only once the agents fence them.
            or (fault.fault in CONTROL_PLANE_FAULTS and fault.start + NODE_TIMEOUT <= run.end + 1)
        ]
        if culprits:
            killed[culprits[-1].fault].append(run)
    costs = []
    for kind in sorted({fault.fault for fault in faults}):
        spans = [fault.end - fault.start for fault in faults if fault.fault == kind]
        lost = killed.get(kind, [])
        costs.append(
            FaultCost(
                kind,
                len(spans),
                round(sum(spans) / len(spans), 1),
                round(max(spans), 1),
                len(lost),
                round(sum(run.end - run.start for run in lost), 1),
            )
        )
    return costs
