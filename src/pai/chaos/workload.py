"""The chaos run's users: a stream of jobs of known outcome through the SDK and `pai`.

Each kind of job says the state it must end in whatever faults it meets: a job that succeeds,
one that fails with a given code, one that fails once and succeeds on its retry, a two-host
gang whose roles talk over TCP, and one its user stops. Their tasks run `task_program.py`,
which records every run. A user submits through one API worker and, when no answer comes, tries
the other (as a load balancer would); a submission whose answer never came is recorded as such
(it may exist), and one answered "exists" after such a try was accepted the first time.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from pai.chaos.checker import reported_exit_code
from pai.chaos.history import Call, History, Submission
from pai.sdk import Client
from pai.sdk.connections import Connections
from pai.sdk.errors import ConflictError, PaiError, ServerUnavailableError

PATIENCE = 180.0
"""How long a user keeps trying one submission or stop before giving up."""
PAUSE = 1.0
PROGRAM = Path(__file__).with_name("task_program.py")
T = TypeVar("T")
FAIL_STATUS = 3
"""The exit status of a job that fails."""


@dataclass(frozen=True)
class JobKind:
    name: str
    weight: int
    expected_state: str
    expected_exit_code: int | None = None
    retries: int = 0

    def job_file(self, job: str, runs: Path, rng: random.Random) -> str:
        head = (
            f"protocolVersion: 2\nname: {job}\ntype: job\njobRetryCount: {self.retries}\n"
            "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\n"
            "taskRoles:\n"
        )
        program = f"python3 {PROGRAM} {runs}"
        seconds = f"{rng.uniform(1, 8):.1f}"
        if self.name == "gang":  # each role takes a whole host: the two run on two hosts
            return (
                head
                + _role("server", 2, f"{program} server {seconds}")
                + _role("client", 2, f"{program} client {seconds}")
            )
        behaviour = {"stopped": "forever", "fail": f"fail {seconds} {FAIL_STATUS}"}.get(
            self.name, f"{self.name} {seconds}"
        )
        return head + _role("main", 1, f"{program} {behaviour}")


def _role(name: str, gpus: int, command: str) -> str:
    return (
        f"  {name}:\n    instances: 1\n    dockerImage: image\n"
        f"    resourcePerInstance: {{cpu: {gpus}, memoryMB: 256, gpu: {gpus}}}\n"
        f"    commands:\n      - {command}\n"
    )


KINDS = (
    JobKind("succeed", 3, "SUCCEEDED"),
    JobKind("fail", 1, "FAILED", expected_exit_code=reported_exit_code(FAIL_STATUS)),
    JobKind("flaky", 1, "SUCCEEDED", retries=1),
    JobKind("gang", 1, "SUCCEEDED"),
    JobKind("stopped", 1, "STOPPED"),
)


class RecordedConnections(httpx.BaseTransport):
    """The SDK's connections, with every exchange written to the history as a `Call`."""

    def __init__(self, history: History, client: str) -> None:
        self._inner = Connections()
        self._history = history
        self._client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.time()
        path = request.url.path.removeprefix("/api/v2")
        try:
            response = self._inner.handle_request(request)
        except httpx.TransportError:
            self._history.add(Call(self._client, request.method, path, start, time.time(), None))
            raise
        self._history.add(
            Call(
                self._client,
                request.method,
                path,
                start,
                time.time(),
                response.status_code,
                response.headers.get("Retry-After"),
            )
        )
        return response

    def close(self) -> None:
        self._inner.close()


@dataclass
class Outcome:
    accepted: bool | None
    detail: str


class User:
    """One user submitting jobs until `until`, then finishing the stops it owes (`run`, in a
    thread of its own)."""

    def __init__(
        self,
        name: str,
        submit: Callable[[str, str], Outcome],
        stop: Callable[[str], Outcome],
        read: Callable[[str], None],
        history: History,
        runs: Path,
        seed: int,
        until: float,
        mean_gap: float,
    ) -> None:
        self.user = name
        self._submit, self._stop, self._read = submit, stop, read
        self._history = history
        self._runs = runs
        self._rng = random.Random(seed)
        self._until = until
        self._mean_gap = mean_gap
        self.stop_failures: list[str] = []

    def run(self) -> None:
        stops: list[tuple[float, str]] = []
        number = 0
        while time.time() < self._until:
            kind = self._rng.choices(KINDS, [kind.weight for kind in KINDS])[0]
            job = f"{kind.name}-{number}"
            number += 1
            start = time.time()
            outcome = self._submit(job, kind.job_file(job, self._runs, self._rng))
            self._history.add(
                Submission(
                    f"{self.user}~{job}",
                    kind.name,
                    kind.expected_state,
                    kind.expected_exit_code,
                    "pai" if self.user == CLI_USER else "sdk",
                    start,
                    time.time(),
                    outcome.accepted,
                    outcome.detail,
                )
            )
            if kind.name == "stopped" and outcome.accepted is not False:
                stops.append((time.time() + self._rng.uniform(3, 12), job))
            stops = self._due_stops(stops, time.time())
            self._read(job)
            time.sleep(self._rng.expovariate(1 / self._mean_gap))
        while stops:
            stops = self._due_stops(stops, time.time())
            time.sleep(0.5)

    def _due_stops(self, stops: list[tuple[float, str]], now: float) -> list[tuple[float, str]]:
        for due, job in stops:
            if due <= now:
                outcome = self._stop(job)
                if not outcome.accepted:
                    self.stop_failures.append(f"{job}: {outcome.detail}")
        return [(due, job) for due, job in stops if due > now]


CLI_USER = "carol"
SDK_USERS = ("alice", "bob")
PASSWORD = "chaos-User-password-1"


def with_failover(attempt: Callable[[int], T], workers: int, unanswered: list[str]) -> T:
    """`attempt(worker)` on one API worker after another until one answers, for up to
    `PATIENCE` seconds (then `TimeoutError`); each try that no one answered is added to
    `unanswered`."""
    deadline = time.monotonic() + PATIENCE
    worker = random.randrange(workers)
    while time.monotonic() < deadline:
        try:
            return attempt(worker)
        except PaiError as problem:
            if not isinstance(problem, ServerUnavailableError) and problem.status != 507:
                raise
            unanswered.append(str(problem))
            worker = (worker + 1) % workers
            time.sleep(PAUSE)
    raise TimeoutError("; ".join(unanswered[-3:]))


class SdkUser:
    """A user's SDK clients, one per API worker, each exchange recorded."""

    def __init__(self, name: str, urls: list[str], history: History) -> None:
        with Client.login(urls[0], name, PASSWORD) as first:
            token = first.token
        self.clients = [
            Client(url, token, connections=RecordedConnections(history, f"{name}@{index + 1}"))
            for index, url in enumerate(urls)
        ]

    def submit(self, job: str, text: str) -> Outcome:
        unanswered: list[str] = []
        try:
            with_failover(
                lambda worker: self.clients[worker].submit(text), len(self.clients), unanswered
            )
        except ConflictError as conflict:
            if unanswered:  # the unanswered try had arrived
                return Outcome(True, f"answered as existing after an unanswered try: {conflict}")
            return Outcome(False, str(conflict))
        except PaiError as refused:
            return Outcome(False, str(refused))
        except TimeoutError as gave_up:
            return Outcome(None, f"no answer: {gave_up}")
        return Outcome(True, "; ".join(unanswered))

    def stop(self, job: str) -> Outcome:
        try:
            with_failover(lambda worker: self.clients[worker].stop(job), len(self.clients), [])
        except (PaiError, TimeoutError) as problem:
            return Outcome(False, str(problem))
        return Outcome(True, "")

    def read(self, job: str) -> None:
        """What a user looks at: their jobs, and the one just submitted."""
        client = random.choice(self.clients)
        try:
            client.jobs(limit=20)
            client.job(job)
        except PaiError:
            pass  # a read the store or a worker could not answer: recorded as a call

    def close(self) -> None:
        for client in self.clients:
            client.close()


class CliUser:
    """A user of the `pai` command, logged in to each API worker with a config of its own."""

    def __init__(self, name: str, urls: list[str], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._directory = directory
        self._configs = [directory / f"config-{index + 1}" for index in range(len(urls))]
        for config, url in zip(self._configs, urls, strict=True):
            done = self._pai(config, "login", "--server", url, "--username", name)
            if done.returncode != 0:
                raise RuntimeError(f"pai login as {name} failed: {done.stderr}")

    def _pai(self, config: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
        script = Path(sys.executable).with_name("pai")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "pai.cli.main"]
        if arguments[0] == "login":
            arguments = (*arguments, "--password", PASSWORD)
        return subprocess.run(
            [*command, *arguments],
            env={"PAI_CONFIG": str(config), "PATH": str(Path(sys.executable).parent)},
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _run(self, *arguments: str) -> Outcome:
        deadline = time.monotonic() + PATIENCE
        unanswered = False
        problems: list[str] = []
        config = random.choice(self._configs)
        while time.monotonic() < deadline:
            done = self._pai(config, *arguments)
            said = (done.stdout + done.stderr).strip()
            if done.returncode == 0:
                return Outcome(True, "; ".join(problems))
            if "exists" in said and unanswered:
                return Outcome(True, f"answered as existing after an unanswered try: {said}")
            if not unavailable(said):
                return Outcome(False, said)
            unanswered = True
            problems.append(said.splitlines()[-1] if said else f"exit {done.returncode}")
            config = self._configs[(self._configs.index(config) + 1) % len(self._configs)]
            time.sleep(PAUSE)
        return Outcome(None, "; ".join(problems[-3:]))

    def submit(self, job: str, text: str) -> Outcome:
        path = self._directory / f"{job}.yaml"
        path.write_text(text)
        return self._run("submit", str(path))

    def stop(self, job: str) -> Outcome:
        return self._run("stop", job)

    def read(self, job: str) -> None:
        self._pai(random.choice(self._configs), "jobs")


def unavailable(said: str) -> bool:
    """Whether `pai` said that no server answered (rather than that it refused)."""
    return any(
        words in said
        for words in ("cannot reach", "did not answer", "not ready", "503", "507", "unavailable")
    )
