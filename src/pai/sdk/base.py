"""What every part of the client shares: the transport and who the caller is."""

from __future__ import annotations

from pai.sdk.names import framework_name
from pai.sdk.transport import Transport


class ApiBase:
    """State shared by the client's method groups (identity, jobs, logs, cluster)."""

    def __init__(self, transport: Transport, username: str | None) -> None:
        self._transport = transport
        self._username = username

    @property
    def server(self) -> str:
        """The server's base URL, e.g. `http://127.0.0.1:9186`."""
        return self._transport.server

    @property
    def username(self) -> str | None:
        """The logged-in user (asked from the server once if the token came alone), or None
        without a token."""
        if self._username is None and self._transport.has_token:
            self._username = str(self._transport.get("/tokens/check")["username"])
        return self._username

    def _framework_name(self, name: str) -> str:
        """`user~job` for a job name; a bare name is the logged-in user's job."""
        return framework_name(name, None if "~" in name else self.username)
