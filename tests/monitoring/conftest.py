"""A real SMTP server (aiosmtpd) on a free loopback port, keeping what it receives."""

from __future__ import annotations

import email
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller


@dataclass
class Mailbox:
    """What the SMTP server received: (envelope recipients, parsed message)."""

    port: int
    messages: list[tuple[list[str], Message]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content = envelope.content
        message = email.message_from_bytes(
            content if isinstance(content, bytes) else content.encode()
        )
        self.messages.append((list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox(free_port())
    server = Controller(box, hostname="127.0.0.1", port=box.port)
    server.start()
    yield box
    server.stop()
