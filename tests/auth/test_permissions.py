"""Rights are the union of the ACLs of a user's groups."""

from __future__ import annotations

from datetime import UTC, datetime

from pai.auth.permissions import Grants, Principal
from pai.auth.tokens import TokenClaims
from pai.store import Group


def principal(*groups: Group) -> Principal:
    claims = TokenClaims(
        username="alice",
        application=False,
        issued_at=datetime.now(UTC),
        expires_at=None,
        token_hash="0" * 64,
    )
    return Principal(token=claims, grants=Grants.of_groups(groups))


def test_grants_are_the_union_over_groups() -> None:
    grants = Grants.of_groups(
        [
            Group(
                groupname="a",
                is_admin=False,
                virtual_clusters=["vc2", "default"],
                storage_configs=["s1"],
            ),
            Group(
                groupname="b", is_admin=False, virtual_clusters=["vc1", "vc2"], storage_configs=[]
            ),
        ]
    )
    assert grants == Grants(
        admin=False, virtual_clusters=("default", "vc1", "vc2"), storage_configs=("s1",)
    )


def test_one_admin_group_makes_an_admin() -> None:
    admin = Group(groupname="admins", is_admin=True, virtual_clusters=[], storage_configs=[])
    plain = Group(groupname="a", is_admin=False, virtual_clusters=["vc1"], storage_configs=[])
    assert Grants.of_groups([plain, admin]).admin
    assert not Grants.of_groups([plain]).admin


def test_users_use_their_groups_vcs_and_admins_use_every_vc() -> None:
    team = Group(groupname="team", is_admin=False, virtual_clusters=["vc1"], storage_configs=[])
    admins = Group(groupname="admins", is_admin=True, virtual_clusters=[], storage_configs=[])
    assert principal(team).may_use_virtual_cluster("vc1")
    assert not principal(team).may_use_virtual_cluster("vc2")
    assert principal(admins).may_use_virtual_cluster("vc2")


def test_owners_and_admins_act_for_a_user() -> None:
    team = Group(groupname="team", is_admin=False, virtual_clusters=[], storage_configs=[])
    admins = Group(groupname="admins", is_admin=True, virtual_clusters=[], storage_configs=[])
    assert principal(team).may_act_for("alice")
    assert not principal(team).may_act_for("bob")
    assert principal(admins).may_act_for("bob")
