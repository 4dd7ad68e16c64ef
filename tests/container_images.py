"""Fixtures for tests of container tasks: a container sandbox per test process (its own image
store and a password-protected registry on 127.0.0.1, see `pai.executors.sandboxes.containers`),
and the images the tests run: busybox, and a minimal Debian with Python 3 (built with
debootstrap by whichever test process needs it first, and kept in the tests' cache, PAI_TEST_CACHE
or ~/.cache/pai-tests, for later runs: debootstrap takes minutes; delete the file to rebuild it)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pai.executors.sandboxes.containers import (
    ContainerSandbox,
    SandboxUnavailable,
    debian_python,
    missing_tools,
)

FAILING_RUNTIME = '[engine.runtimes]\npai-fails = ["/bin/false"]\n'
"""An OCI runtime that fails every container, as a runtime that cannot run containers on a
machine does (its packaged defaults asking for limits the machine does not allow)."""
BUSYBOX = "pai-test/busybox:1"
PYTHON = "pai-test/python:3"


def cache_folder() -> Path:
    """The folder where tests keep what is slow to make and the same from run to run."""
    folder = Path(os.environ.get("PAI_TEST_CACHE") or Path.home() / ".cache" / "pai-tests")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def container_sandbox(
    tmp_path_factory: pytest.TempPathFactory, requirement: Callable[[bool, str], None]
) -> Iterator[ContainerSandbox]:
    """A container sandbox for this test process (xdist worker)."""
    missing = missing_tools()
    requirement(os.geteuid() == 0, "container tests run podman as root")
    requirement(not missing, f"container tests need {', '.join(missing)} (apt-get install)")
    sandbox = ContainerSandbox(tmp_path_factory.mktemp("containers"))
    try:
        sandbox.start()
    except SandboxUnavailable as error:
        requirement(False, str(error))
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="session")
def busybox_image(container_sandbox: ContainerSandbox) -> str:
    """busybox in the sandbox's registry (a shell and the usual tools, no Python)."""
    return container_sandbox.busybox(BUSYBOX)


@pytest.fixture(scope="session")
def python_image(
    container_sandbox: ContainerSandbox, requirement: Callable[[bool, str], None]
) -> str:
    """A minimal Debian with Python 3 in the sandbox's registry."""
    shared = cache_folder()
    with open(shared / "debian-python.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            archive = debian_python(shared)
        except SandboxUnavailable as error:
            requirement(False, str(error))
    return container_sandbox.image_from(archive, PYTHON)


@pytest.fixture
def sandbox_env(
    container_sandbox: ContainerSandbox, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """This process's environment points podman at the sandbox for the test (a PAI or an
    executor started in it uses the sandbox's runtime configuration)."""
    for name, value in container_sandbox.env.items():
        monkeypatch.setenv(name, value)
    return container_sandbox.env


class RuntimeConfiguration:
    """A runtime configuration (CONTAINERS_CONF) at `path`: the sandbox's, or the same with an
    OCI runtime that fails every container."""

    def __init__(self, sandbox: ContainerSandbox, path: Path) -> None:
        self.working = Path(sandbox.env["CONTAINERS_CONF"]).read_text()
        self.path = path

    def works(self) -> None:
        self.path.write_text(self.working)

    def fails(self) -> None:
        kept = [line for line in self.working.splitlines() if not line.startswith("runtime =")]
        text = "\n".join(kept).replace("[engine]", '[engine]\nruntime = "pai-fails"', 1)
        self.path.write_text(f"{text}\n{FAILING_RUNTIME}")
