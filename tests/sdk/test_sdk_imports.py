"""`pai.sdk` is cheap to import and loads each part when first used; every public name is
there all the same."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pai.sdk


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps([*sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout))


def test_importing_the_sdk_or_its_errors_loads_no_http_client_or_models() -> None:
    loaded = modules_after("import pai.sdk; from pai.sdk import NotFoundError, load_config")

    assert {"httpx", "pydantic", "pai.sdk.client", "pai.protocol"}.isdisjoint(loaded)


def test_the_client_is_loaded_when_first_named() -> None:
    loaded = modules_after("from pai.sdk import Client")

    assert {"httpx", "pydantic", "pai.sdk.client"} <= loaded
    assert "pai.protocol" not in loaded  # needed only to read an invalid job's problems


def test_every_public_name_can_be_imported() -> None:
    namespace: dict[str, object] = {}
    exec("from pai.sdk import *", namespace)

    assert set(pai.sdk.__all__) <= set(namespace)
    assert namespace["Client"].__module__ == "pai.sdk.client"  # type: ignore[attr-defined]
    assert set(pai.sdk.__all__) <= set(dir(pai.sdk))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Clinet'"):
        pai.sdk.Clinet  # type: ignore[attr-defined]  # noqa: B018
