"""How a client reaches URLs: plain connections for http://, TLS set up on the first https://.

Setting up TLS loads every trusted certificate authority, a few hundredths of a second that a
`pai` command talking to an http:// server (`pai up` on this machine, a cluster on its own
network) would otherwise pay on every run for nothing. An https:// URL gets httpx's own
transport, with the same checks as ever.
"""

from __future__ import annotations

import httpx


class Connections(httpx.BaseTransport):
    """httpx's transport for https:// URLs, made when the first one is requested; another for
    the rest."""

    def __init__(self) -> None:
        # Its TLS settings are never used: nothing it sends is encrypted.
        self._plain = httpx.HTTPTransport(verify=False)
        self._secure: httpx.HTTPTransport | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "https":
            return self._plain.handle_request(request)
        if self._secure is None:
            self._secure = httpx.HTTPTransport()
        return self._secure.handle_request(request)

    def close(self) -> None:
        self._plain.close()
        if self._secure is not None:
            self._secure.close()
