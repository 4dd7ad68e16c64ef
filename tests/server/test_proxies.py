"""Who the client is behind reverse proxies: only trusted proxies may name it."""

from __future__ import annotations

import ipaddress

import pytest

from pai.server.proxies import forwarded_client

TRUSTED = (ipaddress.ip_network("10.0.0.0/24"), ipaddress.ip_network("::1/128"))


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        ("203.0.113.9", ["198.51.100.1"], "203.0.113.9"),  # not a proxy: its header is ignored
        ("10.0.0.5", [], "10.0.0.5"),  # a proxy that names nobody
        ("10.0.0.5", ["198.51.100.1"], "198.51.100.1"),
        ("10.0.0.5", ["6.6.6.6, 198.51.100.1"], "198.51.100.1"),  # the left part is the client's
        ("10.0.0.5", ["6.6.6.6", "198.51.100.1, 10.0.0.7"], "198.51.100.1"),  # two proxies
        ("::1", ["10.0.0.7, 10.0.0.8"], "10.0.0.7"),  # only proxies: the farthest one
        ("10.0.0.5", ["not-an-address"], "not-an-address"),
    ],
)
def test_the_nearest_untrusted_hop_is_the_client(
    peer: str, forwarded_for: list[str], client: str
) -> None:
    assert forwarded_client(peer, forwarded_for, TRUSTED) == client
