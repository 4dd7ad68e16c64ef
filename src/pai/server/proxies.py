"""Who the client is behind reverse proxies that the administrator trusts."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from pai.settings import Network


def forwarded_client(peer: str, forwarded_for: Sequence[str], trusted: Sequence[Network]) -> str:
    """The client's address: the connection's peer, or, when that peer is a trusted proxy,
    the nearest address in `X-Forwarded-For` that is not itself a trusted proxy (addresses
    further left were written by whoever sent the request and prove nothing)."""
    if not _is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer


def _is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in trusted)
