"""Users and groups: rights through groups, and the invariants that keep the cluster usable."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pai.auth.directory import Directory
from pai.auth.permissions import Grants
from pai.auth.tokens import TokenService, token_hash
from pai.errors import (
    ConflictGroupError,
    ConflictUserError,
    ForbiddenUserError,
    IncorrectPasswordError,
    NoGroupError,
    NoUserError,
    NoVirtualClusterError,
)
from pai.store import Database, identity


def names(groups: object) -> list[str]:
    return sorted(group.groupname for group in groups)  # type: ignore[attr-defined]


def test_a_new_user_belongs_to_default_and_gets_its_vc(database: Database) -> None:
    with database.session() as session:
        user = Directory(session).create_user("alice", "alice-pw", email="a@example.com")
        assert names(user.groups) == ["default"]
        assert Grants.of_user(user) == Grants(False, ("default",), ())


def test_virtual_clusters_and_admin_become_memberships(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        directory.create_group("vision", virtual_clusters=["vc_vision"], storage_configs=["nfs"])
        user = directory.create_user("bob", "bob-pw", admin=True, virtual_clusters=["vc_vision"])
        assert names(user.groups) == ["admingroup", "default", "vision"]
        assert Grants.of_user(user) == Grants(True, ("default", "vc_vision"), ("nfs",))
        with pytest.raises(NoVirtualClusterError, match="'vc_other' is not granted"):
            directory.create_user("carol", "carol-pw", virtual_clusters=["vc_other"])


def test_replacing_virtual_clusters_keeps_default_and_other_groups(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        directory.create_group("one", virtual_clusters=["vc1"])
        directory.create_group("two", virtual_clusters=["vc2"])
        directory.create_group("readers", storage_configs=["s1"])
        directory.create_user("dave", "dave-pw", virtual_clusters=["vc1"])
        directory.add_to_group("dave", "readers")
        user = directory.update_user("dave", virtual_clusters=["vc2"])
        assert names(user.groups) == ["default", "readers", "two"]


def test_names_are_unique(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        with pytest.raises(ConflictUserError):
            directory.create_user("admin", "whatever")
        with pytest.raises(ConflictGroupError):
            directory.create_group("default")


def test_authentication_tells_unknown_users_from_wrong_passwords(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        assert directory.authenticate("admin", "admin-password").username == "admin"
        with pytest.raises(NoUserError) as unknown:
            directory.authenticate("nobody", "x")
        assert unknown.value.status == 400
        with pytest.raises(IncorrectPasswordError):
            directory.authenticate("admin", "wrong")


@pytest.mark.parametrize(
    "change",
    [
        lambda directory: directory.delete_user("admin"),
        lambda directory: directory.update_user("admin", admin=False),
        lambda directory: directory.remove_from_group("admin", "admingroup"),
        lambda directory: directory.set_groups("admin", []),
        lambda directory: directory.update_group("admingroup", admin=False),
    ],
    ids=["delete", "demote", "leave group", "replace groups", "group loses admin"],
)
def test_the_last_administrator_stays(database: Database, change: object) -> None:
    with (
        pytest.raises(ForbiddenUserError, match="without an administrator"),
        database.session() as session,
    ):
        change(Directory(session))  # type: ignore[operator]
    with database.session() as session:
        assert identity.count_admins(session) == 1


def test_another_admin_can_be_removed_once_one_remains(database: Database) -> None:
    with database.session() as session:
        Directory(session).create_user("second", "second-pw", admin=True)
    with database.session() as session:
        Directory(session).delete_user("admin")
        assert identity.count_admins(session) == 1


def test_default_membership_and_builtin_groups_are_permanent(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        directory.create_user("erin", "erin-pw")
        with pytest.raises(ForbiddenUserError, match="default group"):
            directory.remove_from_group("erin", "default")
        assert names(directory.set_groups("erin", []).groups) == ["default"]
        for builtin in ("default", "admingroup"):
            with pytest.raises(ForbiddenUserError, match="cannot be deleted"):
                directory.delete_group(builtin)
        with pytest.raises(NoGroupError):
            directory.set_groups("erin", ["missing"])


def test_a_new_password_signs_the_user_out_elsewhere(database: Database) -> None:
    service = TokenService(b"k" * 32)
    with database.session() as session:
        user = Directory(session).create_user("frank", "frank-pw")
        kept = service.issue(session, user, lifetime=timedelta(hours=1)).token
        other = service.issue(session, user, lifetime=timedelta(hours=1)).token
        application = service.issue(session, user, lifetime=None).token
    with database.session() as session:
        Directory(session).update_user(
            "frank", password="frank-new-pw", keep_token_hash=token_hash(kept)
        )
    with database.session() as session:
        alive = {
            token: identity.find_token(session, token_hash(token)) is not None
            for token in (kept, other, application)
        }
        assert Directory(session).authenticate("frank", "frank-new-pw")
    assert alive == {kept: True, other: False, application: True}


def test_extensions_merge_on_patch_and_are_replaced_otherwise(database: Database) -> None:
    with database.session() as session:
        directory = Directory(session)
        directory.create_user("gina", "gina-pw", extension={"a": 1})
        merged = directory.update_user("gina", extension={"b": 2}, merge_extension=True)
        assert merged.extension == {"a": 1, "b": 2}
        replaced = directory.update_user("gina", extension={"c": 3})
        assert replaced.extension == {"c": 3}
