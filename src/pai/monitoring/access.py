"""The monitoring token: what Prometheus (scraping `/metrics`) and Alertmanager (calling the
webhook) send to PAI. It is derived from the cluster's secret key, so it is the same for every
API replica, is never stored, and changes when the key does."""

from __future__ import annotations

import hashlib
import hmac

from pai.auth.secret import load_secret_key
from pai.settings import Settings

PURPOSE = b"pai monitoring: /metrics and the Alertmanager webhook"


def monitoring_token(settings: Settings) -> str:
    return hmac.new(load_secret_key(settings), PURPOSE, hashlib.sha256).hexdigest()
