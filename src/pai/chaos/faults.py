"""The faults a chaos run injects, each with its undo, and the runner of a schedule.

Each injector breaks something, holds the fault, undoes it (as an operator or systemd would:
start the process again, bring the link up, start Ray on the host again) and returns once the
part is back, with a note of what happened. The runner starts each planned fault at its time
in a thread of its own, once its target is free, and records it as a `Fault` from the break to
the recovery.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable

import psutil

from pai.chaos.cluster import DISK_FLOOR, ChaosCluster, Service
from pai.chaos.history import Fault, History
from pai.chaos.schedule import PlannedFault
from pai.diskfloor import DiskFloor, room

RECOVERY_PATIENCE = 180.0
RAY_DROPS_AFTER = 30.0
"""Seconds of a cut after which Ray has declared the host dead (the sandbox's health check:
three failures of a 10 s timeout and a 1 s period, about 33 s, less the time already spent)."""
RAY_DROP_CHECK = 3.0
"""Seconds after a link comes back before looking whether Ray dropped the host meanwhile."""
MOST_HOSTS_DOWN = 2
"""Of the three hosts, at most this many are lost or cut at once."""


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = RECOVERY_PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:g} s: {what}")
        time.sleep(0.2)


class Injectors:
    """The fault kinds of `schedule.FAULT_KINDS`, on one cluster."""

    def __init__(self, cluster: ChaosCluster) -> None:
        self.cluster = cluster

    def inject(self, fault: str, target: str, hold: float) -> str:
        injector: Callable[[str, float], str] = getattr(self, fault.replace("-", "_"))
        return injector(target, hold)

    def controller_kill(self, _: str, hold: float) -> str:
        acting = self.cluster.acting_controller()
        victim = acting or random.choice(self.cluster.controllers)
        victim.kill()
        time.sleep(hold)
        victim.start()
        _wait_for(lambda: self.cluster.acting_controller() is not None, "a controller acts")
        now = self.cluster.acting_controller()
        role = "acting" if acting is victim else "standby"
        return f"{victim.name} ({role}) killed; {now.name if now else '?'} acts"

    def api_kill(self, target: str, hold: float) -> str:
        worker = self._service(target)
        worker.kill()
        time.sleep(hold)
        worker.start()
        worker.wait_answering(RECOVERY_PATIENCE)
        return f"{target} killed, started again after {hold:g} s"

    def _service(self, name: str) -> Service:
        return next(s for s in self.cluster.api_workers if s.name == name)

    def agent_kill(self, target: str, _: float) -> str:
        agents = self.cluster.host_processes(target, "NodeAgent")
        for agent in agents:
            agent.send_signal(signal.SIGKILL)
        psutil.wait_procs(agents, timeout=10)
        pids = {agent.pid for agent in agents}
        _wait_for(
            lambda: any(
                p.pid not in pids for p in self.cluster.host_processes(target, "NodeAgent")
            ),
            f"Ray restarts the agent on {target}",
        )
        return f"agent pids {sorted(pids)} killed; Ray started a new one"

    def host_loss(self, target: str, hold: float) -> str:
        self.cluster.sandbox.stop_worker(target)
        time.sleep(hold)
        self.cluster.ensure_ray(target)
        return f"every process on {target} killed; Ray started again after {hold:g} s"

    def link_cut(self, target: str, hold: float) -> str:
        self.cluster.sandbox.cut(target)
        time.sleep(hold)
        self.cluster.sandbox.reconnect(target)
        if hold >= RAY_DROPS_AFTER:
            # Ray declared the host dead; its raylet ends when it hears so, at a time of Ray's
            # choosing: the operator starts Ray there again.
            self.cluster.restart_ray(target)
            return f"link down for {hold:g} s; Ray declared the host dead and was started again"
        time.sleep(RAY_DROP_CHECK)
        if self.cluster.ensure_ray(target):
            return f"link down for {hold:g} s; Ray had dropped the host and was started again"
        return f"link down for {hold:g} s"

    def disk_fill(self, target: str, hold: float) -> str:
        """Fill the host's disk until only half its floor is free, as a task writing without
        end would: the node takes no new tasks and its tasks' logs are cut meanwhile."""
        disk = self.cluster.host_disk(target)
        filler = disk / ".chaos-fill"
        disk_room = room(disk, DiskFloor.parse(DISK_FLOOR))
        size = max(0, disk_room.free - disk_room.floor // 2)
        with open(filler, "wb") as out:
            os.posix_fallocate(out.fileno(), 0, size)
        time.sleep(hold)
        filler.unlink()
        return f"{size // (1024 * 1024)} MiB written, {hold:g} s under the floor"

    def store_stop(self, _: str, hold: float) -> str:
        self.cluster.postgres.pause()
        time.sleep(hold)
        self.cluster.postgres.resume()
        return f"PostgreSQL stopped for {hold:g} s"


class FaultRunner:
    """Runs `planned` from `started` on (`run`), each fault in a thread of its own."""

    def __init__(
        self,
        injectors: Injectors,
        planned: list[PlannedFault],
        history: History,
        started: float,
    ) -> None:
        self._injectors = injectors
        self._planned = planned
        self._history = history
        self._started = started
        self._busy: dict[str, threading.Lock] = {}
        self._hosts_down = threading.BoundedSemaphore(MOST_HOSTS_DOWN)
        self._threads: list[threading.Thread] = []
        self.failures: list[str] = []

    def run(self) -> None:
        for fault in self._planned:
            time.sleep(max(0.0, self._started + fault.at - time.time()))
            thread = threading.Thread(target=self._one, args=(fault,), daemon=True)
            thread.start()
            self._threads.append(thread)
        for thread in self._threads:
            thread.join()

    def _one(self, fault: PlannedFault) -> None:
        disrupts_host = fault.fault in ("host-loss", "link-cut")
        with self._busy.setdefault(fault.target, threading.Lock()):
            if disrupts_host:
                self._hosts_down.acquire()
            start = time.time()
            try:
                note = self._injectors.inject(fault.fault, fault.target, fault.hold)
            except Exception as problem:  # recorded, and the run goes on
                note = f"the fault's undo failed: {problem}"
                self.failures.append(f"{fault.fault} {fault.target}: {problem}")
            finally:
                if disrupts_host:
                    self._hosts_down.release()
            self._history.add(Fault(fault.fault, fault.target, start, time.time(), note))
