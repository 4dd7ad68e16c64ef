"""Microsoft's OpenPAI JavaScript SDK (`@microsoft/openpai-js-sdk` on npm), installed once per
test run at the exact versions `openpai-sdk/package-lock.json` pins, and the REST API v2 schema
(swagger.yaml) that package ships.

Needs node and npm, and the npm registry; without them the tests that use these fixtures are
skipped, and fail under PAI_TEST_STRICT=1.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from server.harness import RunningServer, serve_platform, server_settings

PACKAGE = Path(__file__).parent / "openpai-sdk"
"""package.json and package-lock.json of the installation."""
SDK = "@microsoft/openpai-js-sdk"
SCHEMA_IN_SDK = Path("lib/src/api/v2/swagger.yaml")
INSTALL_TIMEOUT_SECONDS = 300

Requirement = Callable[[bool, str], None]


@pytest.fixture(scope="session")
def node(requirement: Requirement) -> str:
    path = shutil.which("node")
    requirement(path is not None, "node is not installed (apt-get install nodejs npm)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def openpai_sdk(
    node: str, requirement: Requirement, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The `node_modules` directory holding the SDK (use it as NODE_PATH)."""
    npm = shutil.which("npm")
    requirement(npm is not None, "npm is not installed (apt-get install npm)")
    assert npm is not None
    target = tmp_path_factory.mktemp("openpai-sdk")
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PACKAGE / name, target / name)
    installed = subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=target,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    requirement(
        installed.returncode == 0,
        f"npm ci of {SDK} failed (is the npm registry reachable?): {installed.stderr[-2000:]}",
    )
    return target / "node_modules"


@pytest.fixture(scope="session")
def openpai_rest_schema(openpai_sdk: Path) -> dict[str, Any]:
    """OpenPAI's REST API v2 description (OpenAPI 3.0), as the SDK package ships it."""
    schema: dict[str, Any] = yaml.safe_load((openpai_sdk / SDK / SCHEMA_IN_SDK).read_text())
    return schema


@pytest.fixture(scope="module")
def platform_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The whole platform on the four-node cluster file, for one test module (SQLite: what
    is checked here is the shape of answers, which no database changes)."""
    with serve_platform(server_settings(tmp_path_factory.mktemp("pai-home"))) as server:
        yield server
