"""What `pai` imports when it starts: only the command that runs, never the platform's heavy
parts. Each case runs the entry point in a fresh interpreter and reads the modules it loaded
(how fast it answers is benchmarks/cli.py's business, not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pai.cli.main import COMMANDS

STARTUP = {
    "pai",
    "pai.cli",
    "pai.cli.main",
    "pai.cli.lazy",
    "pai.cli.failures",
    "pai.sdk",
    "pai.sdk.errors",
    "pai.sdk.config",
}
"""The whole of PAI that `pai` loads before it knows which command runs."""
HEAVY = ("httpx", "httpcore", "pydantic", "yaml", "sqlalchemy", "fastapi", "matplotlib", "ray")
"""Libraries the entry point leaves to the commands that use them."""
PLATFORM = (
    "pai.protocol",
    "pai.server",
    "pai.store",
    "pai.scheduler",
    "pai.orchestrator",
    "pai.executors",
    "pai.sim",
    "pai.platform",
)
"""Parts of PAI that the commands working with jobs on a server never need."""
COMMAND_MODULES = {command.target.partition(":")[0] for command in COMMANDS}


def modules_after(tmp_path: Path, code: str) -> set[str]:
    """The modules a fresh interpreter had loaded when it exited after running `code` (a name
    marked absent, None in `sys.modules`, was not loaded)."""
    listing = tmp_path / "modules.json"
    script = (
        "import atexit, json, sys\n"
        "loaded = lambda: [name for name, module in sys.modules.items() if module is not None]\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write(json.dumps(loaded())))\n"
        f"{code}\n"
    )
    env = {"PAI_CONFIG": str(tmp_path / "no-config"), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, timeout=60)
    return set(json.loads(listing.read_text()))


def modules_loaded(tmp_path: Path, *args: str) -> set[str]:
    """The modules `pai ARGS` loaded (no server is configured: a server command stops at
    "no PAI server is configured", after importing what it needs)."""
    return modules_after(
        tmp_path, f"sys.argv = ['pai', *{list(args)!r}]; import pai.cli.main as m; m.main()"
    )


def pai_modules(modules: set[str]) -> set[str]:
    return {name for name in modules if name == "pai" or name.startswith("pai.")}


def among(modules: set[str], packages: tuple[str, ...] | set[str]) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages)}


def test_importing_the_entry_point_loads_no_command(tmp_path: Path) -> None:
    loaded = modules_after(tmp_path, "import pai.cli.main")

    assert pai_modules(loaded) <= STARTUP
    assert not among(loaded, HEAVY)


@pytest.mark.parametrize("args", [["--help"], []], ids=repr)
def test_the_help_loads_no_command(tmp_path: Path, args: list[str]) -> None:
    loaded = modules_loaded(tmp_path, *args)

    assert pai_modules(loaded) <= STARTUP
    assert not among(loaded, HEAVY)


def test_a_mistyped_command_loads_no_command(tmp_path: Path) -> None:
    loaded = modules_loaded(tmp_path, "jbos")

    assert pai_modules(loaded) <= STARTUP


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["jobs"], "pai.cli.jobs"),
        (["job", "hello"], "pai.cli.jobs"),
        (["logs", "hello"], "pai.cli.logs"),
        (["whoami"], "pai.cli.auth"),
        (["vc"], "pai.cli.cluster"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else value,
)
def test_a_server_command_loads_its_module_and_not_the_platform(
    tmp_path: Path, args: list[str], module: str
) -> None:
    loaded = modules_loaded(tmp_path, *args)

    assert module in loaded
    others = COMMAND_MODULES - {module, "pai.cli.ssh"}  # `pai jobs --interactive` is in ssh
    assert not among(loaded, others)
    assert not among(loaded, PLATFORM)
    assert not among(loaded, ("sqlalchemy", "fastapi", "matplotlib", "ray"))
    assert not among(loaded, ("click", "pygments"))  # httpx's own command-line client


def test_a_command_runs_with_the_garbage_collector_on(tmp_path: Path) -> None:
    """`pai` keeps the collector off only while it starts: a long command (`pai up`, `pai logs
    -f`) must not grow with garbage it never collects."""
    job = Path(__file__).parents[2] / "examples" / "jobs" / "hello-world.yaml"
    script = (
        "import atexit, gc, sys; atexit.register(lambda: print('collecting', gc.isenabled()))\n"
        f"sys.argv = ['pai', 'validate', {str(job)!r}]; import pai.cli.main as m; m.main()"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "collecting True"


def test_pai_also_runs_as_a_module(tmp_path: Path) -> None:
    env = {"PAI_CONFIG": str(tmp_path / "no-config"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "pai.cli.main", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert "Usage: " in done.stdout
