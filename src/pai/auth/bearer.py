"""From the token a request carries to the caller it stands for."""

from __future__ import annotations

from pai.auth.permissions import Grants, Principal
from pai.auth.tokens import TokenService
from pai.store import Database, identity


def authenticate_token(database: Database, tokens: TokenService, token: str) -> Principal:
    """The caller bearing `token`; `UnauthorizedUserError` if it is not live.

    The token, its user and their groups are read in one query, in a read-only transaction:
    checking the token of every request never waits for the database's write lock, and a
    token is refused from the moment its revocation is committed. The token's last use is
    written in a short transaction of its own, at most once a minute.
    """
    with database.reading() as session:
        claims, bearer = tokens.verify(session, token)
    used_at = tokens.use_to_record(bearer)
    if used_at is not None:
        with database.session() as session:
            identity.record_token_use(session, claims.token_hash, used_at)
    return Principal(token=claims, grants=Grants.of_groups(bearer.groups))
