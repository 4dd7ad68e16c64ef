"""Bad ID tokens on demand: the test writes a mode into the file `OIDC_SITE_STATE/tamper`.

- `expired`, `audience`, `nonce`: the provider signs a token with that defect (`claims`);
- `forged`: the token endpoint's ID token gets another user name and the admin group after it
  was signed (as an attacker on the way would), keeping the signature;
- `unsigned`: the same claims sent as an unsigned token (`alg: none`).
"""

import base64
import json
import os
from pathlib import Path


def mode():
    path = Path(os.environ["OIDC_SITE_STATE"]) / "tamper"
    return path.read_text().strip() if path.exists() else ""


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _tampered(token, how):
    header, _, signature = token.split(".")
    claims = _claims(token)
    claims["preferred_username"] = "mallory"
    claims["groups"] = ["pai-admins", "vision"]
    body = _b64(json.dumps(claims).encode())
    if how == "unsigned":
        return f"{_b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{body}."
    return f"{header}.{body}.{signature}"


class TamperingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        how = mode()
        if how in ("forged", "unsigned") and request.path.rstrip("/").endswith("/openid/token"):
            body = json.loads(response.content)
            if "id_token" in body:
                body["id_token"] = _tampered(body["id_token"], how)
                response.content = json.dumps(body).encode()
                response["Content-Length"] = str(len(response.content))
        return response
