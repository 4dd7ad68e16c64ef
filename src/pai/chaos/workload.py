"""The chaos run's users: a stream of jobs of known outcome through the SDK and `pai`.

Each kind of job says the state it must end in whatever faults it meets: a job that succeeds,
one that fails with a given code, one that fails once and succeeds on its retry, a two-host
gang whose roles talk over TCP, one its user stops, and an interactive one whose user logs in
to it over SSH before stopping it. Their tasks run `task_program.py`,
which records every run. A user submits through one API worker and, when no answer comes, tries
the other (as a load balancer would); a submission whose answer never came is recorded as such
(it may exist), and one answered "exists" after such a try was accepted the first time.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

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
    ssh: bool = False
    """Whether the job runs PAI's SSH plugin, and its user logs in to it."""

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
        behaviour = {
            "stopped": "forever",
            "interactive": "forever",
            "fail": f"fail {seconds} {FAIL_STATUS}",
        }.get(self.name, f"{self.name} {seconds}")
        plugins = SSH_PLUGIN if self.ssh else ""
        return head + _role("main", 1, f"{program} {behaviour}") + plugins


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
    JobKind("interactive", 1, "STOPPED", ssh=True),
)
SSH_PLUGIN = "extras:\n  com.microsoft.pai.runtimeplugin:\n    - plugin: ssh\n"
SSH_PATIENCE = 180.0
"""How long a user waits for an interactive job's SSH to take a login."""


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


class Person(Protocol):
    """How one user reaches PAI (the SDK, or the `pai` command)."""

    @property
    def kinds(self) -> tuple[JobKind, ...]:
        """The kinds of job this user submits."""

    def submit(self, job: str, text: str) -> Outcome: ...

    def stop(self, job: str) -> Outcome: ...

    def read(self, job: str) -> None: ...

    def use_ssh(self, job: str) -> str | None:
        """Log in to the job's task over SSH and run a command there; None, or what failed."""


class User:
    """One user submitting jobs until `until` (`run`, in a thread of its own); the jobs that
    must be stopped (after SSH was used in them, for interactive ones) are followed in threads
    of their own, which `run` waits for."""

    def __init__(
        self,
        name: str,
        person: Person,
        history: History,
        runs: Path,
        seed: int,
        until: float,
        mean_gap: float,
    ) -> None:
        self.user = name
        self._person = person
        self._history = history
        self._runs = runs
        self._rng = random.Random(seed)
        self._until = until
        self._mean_gap = mean_gap
        self.problems: list[str] = []
        self.ssh_sessions = 0

    def run(self) -> None:
        followed = []
        number = 0
        kinds = self._person.kinds
        while time.time() < self._until:
            kind = self._rng.choices(kinds, [kind.weight for kind in kinds])[0]
            job = f"{kind.name}-{number}"
            number += 1
            start = time.time()
            outcome = self._person.submit(job, kind.job_file(job, self._runs, self._rng))
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
            if kind.expected_state == "STOPPED" and outcome.accepted is not False:
                delay = self._rng.uniform(3, 12)
                follow = threading.Thread(target=self._follow, args=(kind, job, delay))
                follow.start()
                followed.append(follow)
            self._person.read(job)
            time.sleep(self._rng.expovariate(1 / self._mean_gap))
        for follow in followed:
            follow.join()

    def _follow(self, kind: JobKind, job: str, delay: float) -> None:
        time.sleep(delay)
        if kind.ssh:
            problem = self._person.use_ssh(job)
            if problem is None:
                self.ssh_sessions += 1
            else:
                self.problems.append(f"{job}: SSH not used: {problem}")
        outcome = self._person.stop(job)
        if not outcome.accepted:
            self.problems.append(f"{job}: not stopped: {outcome.detail}")


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

    kinds = KINDS

    def __init__(self, name: str, urls: list[str], history: History, directory: Path) -> None:
        self.name = name
        self._key = directory / f"{name}-key"
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self._key)],
            check=True,
            capture_output=True,
        )
        with Client.login(urls[0], name, PASSWORD) as first:
            token = first.token
            first.add_ssh_key("chaos", self._key.with_suffix(".pub").read_text().strip())
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

    def use_ssh(self, job: str) -> str | None:
        deadline = time.monotonic() + SSH_PATIENCE
        said = "the job never ran"
        while time.monotonic() < deadline:
            try:
                containers = random.choice(self.clients).ssh_info(job).containers
            except PaiError as problem:
                containers, said = [], str(problem)
            if containers:
                task = containers[0]
                done = subprocess.run(
                    [
                        "ssh", "-i", str(self._key), "-p", task.sshPort,
                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                        f"{self.name}@{task.sshIp}", "echo in $PAI_JOB_NAME",
                    ],
                    capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                )  # fmt: skip
                if f"in {self.name}~{job}" in done.stdout:
                    return None
                said = (done.stdout + done.stderr).strip()[-300:]
            time.sleep(1)
        return said

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
    """A user of the `pai` command, logged in to each API worker with a config of its own;
    SSH is for the SDK's users."""

    kinds = tuple(kind for kind in KINDS if not kind.ssh)

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

    def use_ssh(self, job: str) -> str | None:
        return "the `pai` user does not use SSH"


def unavailable(said: str) -> bool:
    """Whether `pai` said that no server answered (rather than that it refused)."""
    return any(
        words in said
        for words in (
            "cannot reach",
            "cannot be reached",
            "did not answer",
            "not ready",
            "503",
            "507",
            "unavailable",
        )
    )
