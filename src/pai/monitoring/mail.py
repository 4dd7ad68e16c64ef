"""E-mail through the administrator's SMTP server (plain, STARTTLS or TLS, with or without
login). A server that cannot be reached or refuses is an error the caller records."""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage

from pai.monitoring.actions import Security, SmtpSettings


class MailError(RuntimeError):
    """Sending failed; the message says where and why."""


def send_mail(smtp: SmtpSettings, to: Sequence[str], subject: str, body: str) -> None:
    message = EmailMessage()
    message["From"] = smtp.sender
    message["To"] = ", ".join(to)
    message["Subject"] = subject
    message.set_content(body)
    where = f"{smtp.host}:{smtp.port}"
    try:
        if smtp.security is Security.TLS:
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                smtp.host,
                smtp.port,
                timeout=smtp.timeout_seconds,
                context=ssl.create_default_context(),
            )
        else:
            client = smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout_seconds)
        with client:
            if smtp.security is Security.STARTTLS:
                client.starttls(context=ssl.create_default_context())
            if smtp.username:
                client.login(smtp.username, smtp.password() or "")
            client.send_message(message)
    except (OSError, smtplib.SMTPException) as error:
        raise MailError(f"cannot send e-mail through {where}: {error}") from None
