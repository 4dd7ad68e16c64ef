"""Marketplace items: who sees and changes them, publishing, searching, stars and runs.

Visibility follows openpaimarketplace: a public item is everybody's; a private one only its
author's; one that is neither is shared with the groups in its `groupList` (and its author).
Administrators see everything. Only the author or an administrator changes or removes an
item, and nobody changes the built-in ones, which come with PAI and change with it.

A published job is checked as a submission would be (an invalid one is refused with the line
of each problem) and stored with its secrets masked: an item never carries a secret.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pai.auth.permissions import Principal
from pai.errors import (
    ConflictItemError,
    ForbiddenUserError,
    InvalidParametersError,
    InvalidProtocolError,
    NoItemError,
)
from pai.protocol import ProtocolError, masked_job_text, parse_job
from pai.store import audit, identity, market
from pai.store.sharing import MarketItemRow

TEMPLATE = "template"
DATA = "data"
SOURCE_MARKETPLACE = "marketplace"
SOURCE_PAI = "pai"
"""The source of the built-in items."""
APPROVED = "approved"
AUDIT_KIND = "marketplace"


@dataclass(frozen=True)
class ItemFields:
    """What a publisher says about an item (the job itself is `protocol`, as YAML)."""

    name: str
    type: str
    protocol: str
    summary: str = ""
    description: str = ""
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    is_public: bool = True
    is_private: bool = False
    group_list: tuple[str, ...] = ()
    data_type: str = ""
    data_url: str = ""


@dataclass(frozen=True)
class ItemView:
    """An item as one caller sees it."""

    row: MarketItemRow
    star_number: int
    starred: bool


@dataclass(frozen=True)
class ItemQuery:
    """Filters of a search; every given one must match (`tags`: all of them)."""

    keyword: str | None = None
    name: str | None = None
    author: str | None = None
    type: str | None = None
    source: str | None = None
    tags: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    starred: bool = False

    def matches(self, view: ItemView) -> bool:
        row = view.row
        if self.keyword is not None:
            words = (row.name, row.summary, row.description, row.author, *row.tags)
            if not any(self.keyword.lower() in word.lower() for word in words):
                return False
        fields = ((self.name, row.name), (self.author, row.author), (self.type, row.type))
        if any(wanted is not None and wanted != value for wanted, value in fields):
            return False
        if self.source is not None and self.source != row.source:
            return False
        if not set(self.tags) <= set(row.tags):
            return False
        if self.categories and not set(self.categories) & set(row.categories):
            return False
        return view.starred or not self.starred


class Marketplace:
    """The marketplace as seen by `caller`, within one transaction `session`."""

    def __init__(self, session: Session, caller: Principal) -> None:
        self._session = session
        self._caller = caller
        user = identity.find_user(session, caller.username)
        self._groups = {group.groupname for group in user.groups} if user else set()

    # -- reading ----------------------------------------------------------------------------

    def search(self, query: ItemQuery) -> list[ItemView]:
        views = self._views(market.all_items(self._session))
        return [view for view in views if query.matches(view)]

    def item(self, item_id: str) -> ItemView:
        """The item, if the caller may see it (NoItemError otherwise, as if it did not exist:
        an item shared with other groups is not revealed)."""
        row = market.find_item(self._session, item_id)
        if row is None or not self.may_see(row):
            raise NoItemError(f"marketplace item '{item_id}' does not exist")
        return self._views([row])[0]

    def may_see(self, row: MarketItemRow) -> bool:
        caller = self._caller
        if caller.admin or row.is_public or row.author == caller.username:
            return True
        return not row.is_private and bool(self._groups & set(row.group_list))

    def star_users(self, item_id: str) -> list[str]:
        return market.star_users(self._session, self.item(item_id).row.id)

    # -- changing ---------------------------------------------------------------------------

    def publish(self, fields: ItemFields) -> ItemView:
        """A new item by the caller."""
        protocol = self._checked(fields)
        row = MarketItemRow(
            id=str(uuid.uuid4()),
            author=self._caller.username,
            source=SOURCE_MARKETPLACE,
            status=APPROVED,
            use_number=0,
            updated_by=self._caller.username,
        )
        _apply(row, fields, protocol)
        self._session.add(row)
        self._flush(fields.name)
        self._audit("publish", row, type=row.type, public=row.is_public, groups=row.group_list)
        return self._views([row])[0]

    def update(self, item_id: str, fields: ItemFields) -> ItemView:
        row = self._changeable(item_id, "change")
        protocol = self._checked(fields)
        _apply(row, fields, protocol)
        row.updated_by = self._caller.username
        self._flush(fields.name)
        self._audit("update", row, public=row.is_public, groups=row.group_list)
        return self._views([row])[0]

    def delete(self, item_id: str) -> None:
        row = self._changeable(item_id, "delete")
        self._session.delete(row)
        self._audit("delete", row)

    def star(self, item_id: str, starred: bool) -> ItemView:
        """Star (or unstar) the item for the caller; doing it twice changes nothing."""
        row = self.item(item_id).row
        username = self._caller.username
        changed = (
            market.add_star(self._session, row.id, username)
            if starred
            else market.remove_star(self._session, row.id, username)
        )
        if changed:
            self._session.flush()
            self._audit("star" if starred else "unstar", row)
        return self._views([row])[0]

    def record_run(self, item_id: str, job: str) -> None:
        """Count a job submitted from the item (openpaimarketplace's `useNumber`)."""
        row = self.item(item_id).row
        self._session.execute(
            update(MarketItemRow)
            .where(MarketItemRow.id == row.id)
            .values(use_number=MarketItemRow.use_number + 1)
        )
        self._audit("run", row, job=job)

    # -- helpers ----------------------------------------------------------------------------

    def _views(self, rows: Sequence[MarketItemRow]) -> list[ItemView]:
        counts = market.star_counts(self._session)
        starred = market.starred_by(self._session, self._caller.username)
        return [
            ItemView(row, counts.get(row.id, 0), row.id in starred)
            for row in rows
            if self.may_see(row)
        ]

    def _changeable(self, item_id: str, action: str) -> MarketItemRow:
        row = self.item(item_id).row
        if row.source == SOURCE_PAI:
            raise ForbiddenUserError(
                f"'{row.name}' comes with PAI and changes only with it; publish a copy instead"
            )
        if not self._caller.may_act_for(row.author):
            raise ForbiddenUserError(
                f"only {row.author} (the author) or an administrator may {action} '{row.name}'"
            )
        return row

    def _checked(self, fields: ItemFields) -> str:
        """The item's job, checked and with its secrets masked."""
        try:
            parse_job(fields.protocol)
            protocol = masked_job_text(fields.protocol)
        except ProtocolError as invalid:
            raise InvalidProtocolError(
                "protocol: " + invalid.summary(),
                problems=[asdict(problem) for problem in invalid.problems],
            ) from None
        missing = sorted(
            set(fields.group_list) - _existing_groups(self._session, fields.group_list)
        )
        if missing:
            raise InvalidParametersError(
                f"groupList: there is no group {', '.join(repr(name) for name in missing)}"
            )
        return protocol

    def _flush(self, name: str) -> None:
        try:
            self._session.flush()
        except IntegrityError:
            raise ConflictItemError(
                f"a marketplace item named '{name}' exists already; choose another name"
            ) from None

    def _audit(self, action: str, row: MarketItemRow, **details: object) -> None:
        audit.record(
            self._session, self._caller.username, action, AUDIT_KIND, row.name, id=row.id, **details
        )


def _apply(row: MarketItemRow, fields: ItemFields, protocol: str) -> None:
    row.name = fields.name
    row.type = fields.type
    row.protocol = protocol
    row.summary = fields.summary
    row.description = fields.description
    row.categories = list(fields.categories)
    row.tags = list(fields.tags)
    row.is_public = fields.is_public
    row.is_private = fields.is_private
    row.group_list = list(fields.group_list)
    row.data_type = fields.data_type
    row.data_url = fields.data_url


def _existing_groups(session: Session, names: Iterable[str]) -> set[str]:
    return {group.groupname for group in identity.find_groups(session, list(names))}
