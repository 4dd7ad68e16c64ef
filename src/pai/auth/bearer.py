"""From the token a request carries to the caller it stands for."""

from __future__ import annotations

import logging
from dataclasses import replace

from pai.auth.bearers import BearerCache
from pai.auth.permissions import Grants, Principal
from pai.auth.tokens import TokenService
from pai.store import Database, identity
from pai.store.failures import store_failure

log = logging.getLogger(__name__)


def remembered_principal(
    tokens: TokenService, bearers: BearerCache, token: str
) -> Principal | None:
    """The caller bearing `token` if that is known without the store (its bearer was read a
    moment ago and its last use is recent enough), else None; `UnauthorizedUserError` if the
    token is forged or expired."""
    claims = tokens.decode(token)
    bearer = bearers.get(claims.token_hash)
    if bearer is None or tokens.use_to_record(bearer) is not None:
        return None
    tokens.check_expiry(bearer)
    return Principal(token=claims, grants=Grants.of_groups(bearer.groups))


def authenticate_token(
    database: Database, tokens: TokenService, bearers: BearerCache, token: str
) -> Principal:
    """The caller bearing `token`; `UnauthorizedUserError` if it is not live.

    The token, its user and their groups are read in one query, in a read-only transaction
    (checking the token of a request never waits for the database's write lock), unless they
    were read before and no identity change committed since (`BearerCache`). The token's last
    use is written in a short transaction of its own, at most once a minute, and not at all
    while the store cannot take writes (a full disk, a restart): the request goes on.
    """
    claims = tokens.decode(token)
    generation = bearers.generation()
    bearer = bearers.get(claims.token_hash)
    if bearer is None:
        with database.reading() as session:
            bearers.check_epoch(session)
            generation = bearers.generation()
            bearer = bearers.get(claims.token_hash) or tokens.verify(session, claims)
        bearers.remember(claims.token_hash, bearer, generation)
    tokens.check_expiry(bearer)
    used_at = tokens.use_to_record(bearer)
    if used_at is not None:
        try:
            with database.session() as session:
                identity.record_token_use(session, claims.token_hash, used_at)
        except Exception as error:
            if store_failure(error) is None:
                raise
            # A request is not refused because its token's last use cannot be noted.
            log.warning("the last use of a token is not recorded: %s", error)
        else:
            bearers.remember(claims.token_hash, replace(bearer, last_used_at=used_at), generation)
    return Principal(token=claims, grants=Grants.of_groups(bearer.groups))
