"""The lock file pins every dependency, and the suite runs on exactly the locked versions.

A dependency added to pyproject.toml without `make lock` would be installed at whatever version
is newest that day, which is how a new PyYAML release once turned main red.
"""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCKED_EXTRAS = ("test", "ray")
STRICT = os.environ.get("PAI_TEST_STRICT") == "1"


def locked_versions() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def declared_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in LOCKED_EXTRAS:
        declared += project["optional-dependencies"][extra]
    return [Requirement(text) for text in declared]


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pins = locked_versions()
    problems = []
    for requirement in declared_requirements():
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None:
            problems.append(f"{requirement.name} is not in requirements.lock")
        elif not requirement.specifier.contains(pinned.split("+")[0], prereleases=True):
            problems.append(f"{requirement.name}=={pinned} is outside {requirement.specifier}")
    assert not problems, "run `make lock`: " + "; ".join(problems)


def test_the_installed_versions_are_the_locked_ones() -> None:
    if not STRICT:
        pytest.skip("a developer may try other versions on purpose; CI installs from the lock")
    pins = locked_versions()
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist.version for dist in metadata.distributions()
    }
    differing = {
        name: (version, installed[name])
        for name, version in pins.items()
        if name in installed and installed[name] != version
    }
    assert not differing, f"installed versions differ from requirements.lock: {differing}"
