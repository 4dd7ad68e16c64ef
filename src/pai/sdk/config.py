"""The client configuration file: which server to talk to, and a token for each server.

`pai login` writes it and every later command (and `Client.from_config()`) reads it. It lives at
`$PAI_CONFIG`, else `~/.pai/config`, and holds tokens, so it is written with mode 600 and
replaced atomically (a crash never leaves half a file). It is JSON:

    {"server": "http://127.0.0.1:9186",
     "servers": {"http://127.0.0.1:9186": {"username": "alice", "token": "..."}}}

Keeping one entry per server means a `--server` override uses that server's own token, and a
token is never sent to a server it was not issued by.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pai.sdk.errors import ConfigError

CONFIG_ENV = "PAI_CONFIG"
SERVER_ENV = "PAI_SERVER"
API_PATH = "/api/v2"


@dataclass(frozen=True)
class Credentials:
    """A user's token on one server."""

    username: str
    token: str = field(repr=False)


@dataclass(frozen=True)
class ClientConfig:
    """The parsed configuration file: the current server and the credentials per server."""

    server: str | None = None
    servers: Mapping[str, Credentials] = field(default_factory=dict)

    def credentials(self, server: str) -> Credentials | None:
        """The credentials stored for `server` (any spelling `normalize_server` accepts)."""
        return self.servers.get(normalize_server(server))

    def with_login(self, server: str, credentials: Credentials) -> ClientConfig:
        """This configuration with `server` made current and its credentials replaced."""
        url = normalize_server(server)
        return replace(self, server=url, servers={**self.servers, url: credentials})

    def without(self, server: str) -> ClientConfig:
        """This configuration without the credentials of `server` (it stays current)."""
        url = normalize_server(server)
        return replace(self, servers={k: v for k, v in self.servers.items() if k != url})


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$PAI_CONFIG` if set, else `~/.pai/config`."""
    env = os.environ if environ is None else environ
    configured = env.get(CONFIG_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".pai" / "config"


def normalize_server(server: str) -> str:
    """`http://host:port` from what a user may type: `host:port`, a trailing slash, or the
    API URL itself (`.../api/v2`). Only http and https are accepted."""
    text = server.strip().rstrip("/")
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"server URL {server!r} is not an http:// or https:// URL")
    path = parts.path.rstrip("/")
    if path.endswith(API_PATH):
        path = path[: -len(API_PATH)]
    return f"{parts.scheme}://{parts.netloc}{path}"


def load_config(path: Path | None = None) -> ClientConfig:
    """Read the configuration; a missing file is an empty configuration."""
    location = path or config_path()
    try:
        text = location.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ClientConfig()
    except OSError as exc:
        raise ConfigError(f"cannot read {location}: {exc.strerror or exc}") from None
    try:
        return _parse(json.loads(text))
    except (json.JSONDecodeError, TypeError, KeyError, ValueError, ConfigError) as exc:
        raise ConfigError(
            f"{location} is not a valid PAI client configuration ({exc}); "
            "delete it and log in again"
        ) from None


def save_config(config: ClientConfig, path: Path | None = None) -> Path:
    """Write the configuration with mode 600 (directory 700 when created), atomically."""
    location = path or config_path()
    document = {
        "server": config.server,
        "servers": {
            url: {"username": entry.username, "token": entry.token}
            for url, entry in config.servers.items()
        },
    }
    try:
        _write_private(location, json.dumps(document, indent=2) + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {location}: {exc.strerror or exc}") from None
    return location


def _write_private(location: Path, text: str) -> None:
    """Replace `location` by `text` atomically; readable by its owner only, from the start."""
    location.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=".config-", dir=location.parent)
    try:
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, location)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _parse(document: Any) -> ClientConfig:
    if not isinstance(document, dict):
        raise ValueError("the document is not a JSON object")
    server = document.get("server")
    entries = document.get("servers") or {}
    if not isinstance(entries, dict):
        raise ValueError("'servers' is not an object")
    servers = {
        normalize_server(url): Credentials(
            username=str(entry["username"]), token=str(entry["token"])
        )
        for url, entry in entries.items()
    }
    return ClientConfig(server=normalize_server(server) if server else None, servers=servers)
