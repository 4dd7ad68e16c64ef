"""Password hashing, tokens and permissions."""

from pai.auth.bootstrap import BootstrapResult, initialize
from pai.auth.directory import Directory
from pai.auth.permissions import Grants, Principal
from pai.auth.secret import load_secret_key
from pai.auth.tokens import IssuedToken, TokenClaims, TokenService, token_hash

__all__ = [
    "BootstrapResult",
    "Directory",
    "Grants",
    "IssuedToken",
    "Principal",
    "TokenClaims",
    "TokenService",
    "initialize",
    "load_secret_key",
    "token_hash",
]
