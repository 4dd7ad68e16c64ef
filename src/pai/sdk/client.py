"""`Client`: the whole API behind one object, and the ways to get one."""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

import httpx

from pai.sdk.cluster import ClusterApi
from pai.sdk.config import SERVER_ENV, config_path, load_config
from pai.sdk.errors import ConfigError
from pai.sdk.identity import IdentityApi, LoginResult
from pai.sdk.logs import LogsApi
from pai.sdk.market import MarketApi
from pai.sdk.monitoring import MonitoringApi
from pai.sdk.ssh import SshApi
from pai.sdk.storage import StorageApi
from pai.sdk.transport import DEFAULT_TIMEOUT, RETRY_FOR, RetryListener, Transport


class Client(LogsApi, MarketApi, ClusterApi, MonitoringApi, IdentityApi, StorageApi, SshApi):
    """A client of one PAI server.

        from pai.sdk import Client

        with Client.login("http://127.0.0.1:9186", "alice", "secret") as client:
            submitted = client.submit(Path("hello.yaml"))
            job = client.wait(submitted.name, timeout=600)
            print(job.state, client.logs(submitted.name, stream="stdout"))

    `Client(server, token)` uses a token you have (a user token or an application token);
    `Client.from_config()` the one `pai login` saved. Every method raises a `PaiError`
    subclass when the server refuses (`NotFoundError`, `ForbiddenError`, ...) and
    `ServerUnavailableError` when the server cannot be reached. Close the client (or use it
    in a `with` block) to release its connections.

    Reads and submissions are tried again for up to `retry_for` seconds while the server
    does not answer or its store is away (0: never); `on_retry(error, seconds)` hears when a
    request starts waiting; `connections` (an httpx transport) carries the requests.
    """

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        username: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry_for: float = RETRY_FOR,
        on_retry: RetryListener | None = None,
        connections: httpx.BaseTransport | None = None,
    ) -> None:
        transport = Transport(
            server,
            token,
            timeout=timeout,
            retry_for=retry_for,
            on_retry=on_retry,
            connections=connections,
        )
        super().__init__(transport, username)
        self._token = token

    @classmethod
    def login(
        cls,
        server: str,
        username: str,
        password: str,
        expiration: int | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Client:
        """Log in with a password and return a client holding the new user token.

        `expiration` is the token's lifetime in seconds (the server's default is a day).
        A wrong password raises `InvalidRequestError` (IncorrectPasswordError), an unknown user
        `NotFoundError` (NoUserError).
        """
        result = log_in(server, username, password, expiration, timeout=timeout)
        return cls(server, result.token, username=result.user, timeout=timeout)

    @classmethod
    def from_config(
        cls,
        path: Path | None = None,
        *,
        server: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry_for: float = RETRY_FOR,
        on_retry: RetryListener | None = None,
    ) -> Client:
        """A client for the server and token `pai login` saved (`$PAI_CONFIG`, else
        `~/.pai/config`).

        `server` (else `$PAI_SERVER`) picks another server than the current one; its own
        saved token is used, if any: a token is never sent to another server than its own.
        """
        location = path or config_path()
        config = load_config(location)
        url = server or os.environ.get(SERVER_ENV) or config.server
        if not url:
            raise ConfigError(
                f"no PAI server is configured ({location} has none): log in with "
                f"`pai login --server URL --username NAME`, or set {SERVER_ENV}"
            )
        credentials = config.credentials(url)
        return cls(
            url,
            credentials.token if credentials else None,
            username=credentials.username if credentials else None,
            timeout=timeout,
            retry_for=retry_for,
            on_retry=on_retry,
        )

    @property
    def token(self) -> str | None:
        """The token this client sends (keep it secret: it is as good as the password)."""
        return self._token

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(server={self.server!r}, username={self._username!r})"


def log_in(
    server: str,
    username: str,
    password: str,
    expiration: int | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> LoginResult:
    """Exchange a password for a user token (what `Client.login` does before connecting)."""
    body: dict[str, str | int] = {"username": username, "password": password}
    if expiration is not None:
        body["expiration"] = expiration
    anonymous = Transport(server, None, timeout=timeout)
    try:
        return LoginResult.model_validate(anonymous.send("POST", "/authn/basic/login", body))
    finally:
        anonymous.close()
