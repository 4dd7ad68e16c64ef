"""Declarative models of the store. Schema changes go through a migration in `migrations/`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from pai.store.types import JsonValue, UtcDateTime, utcnow

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Base of all models; constraint names are deterministic so migrations can refer to them."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UtcDateTime,
        dict[str, Any]: JsonValue,
        dict[str, Any] | None: JsonValue,
        list[str]: JsonValue,
        list[Any]: JsonValue,
    }


class Timestamped:
    """Creation and last-change times, maintained by the ORM."""

    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


memberships = Table(
    "memberships",
    Base.metadata,
    Column("user_id", ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("group_id", ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True, index=True),
)
"""Which user belongs to which group; rights come from groups only."""


class User(Timestamped, Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str] = mapped_column(String(254), default="")
    password_hash: Mapped[str] = mapped_column(String(255))
    """Empty for users of a directory (`source` oidc or ldap): they have no PAI password."""
    source: Mapped[str] = mapped_column(String(16), default="local", server_default="local")
    """Who vouches for the user: `local` (a PAI password), `oidc` or `ldap` (the directory,
    which also decides the user's groups with an `externalName` at each sign-in)."""
    extension: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """Free-form per-user data (OpenPAI's user `extension`, e.g. `sshKeys`)."""

    groups: Mapped[list[Group]] = relationship(
        secondary=memberships, back_populates="members", order_by="Group.groupname"
    )
    tokens: Mapped[list[Token]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )


class Group(Timestamped, Base):
    __tablename__ = "groups"

    id: Mapped[int] = mapped_column(primary_key=True)
    groupname: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    external_name: Mapped[str] = mapped_column(String(255), default="")
    is_admin: Mapped[bool] = mapped_column(default=False)
    """`extension.acls.admin`: members administer the cluster."""
    virtual_clusters: Mapped[list[str]] = mapped_column(default=list)
    """`extension.acls.virtualClusters`: VCs members may submit to."""
    storage_configs: Mapped[list[str]] = mapped_column(default=list)
    """`extension.acls.storageConfigs`: storages members may mount."""
    extension: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The rest of OpenPAI's group `extension` (everything except `acls`)."""

    members: Mapped[list[User]] = relationship(
        secondary=memberships, back_populates="groups", order_by="User.username"
    )


class Token(Base):
    """An issued token, known only by its SHA-256: a leaked database yields no usable token."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    application: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(index=True)
    """None for application tokens, which never expire."""
    last_used_at: Mapped[datetime | None] = mapped_column()

    user: Mapped[User] = relationship(back_populates="tokens")


class SignIn(Base):
    """One sign-in through the OpenID Connect provider, from the redirect to the provider to
    the exchange of its login code for a token. Each step consumes what the previous one
    left: the `state` once (the provider's redirect back), the login `code` once."""

    __tablename__ = "sign_ins"

    id: Mapped[int] = mapped_column(primary_key=True)
    state_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    """SHA-256 of the `state` sent to the provider; cleared when the provider answers."""
    nonce: Mapped[str] = mapped_column(String(64))
    sealed_verifier: Mapped[str] = mapped_column(Text)
    """The PKCE verifier PAI shows the provider, sealed with the cluster key."""
    redirect_uri: Mapped[str] = mapped_column(Text)
    """Where the browser goes back with the login code: the portal or a loopback client."""
    code_challenge: Mapped[str] = mapped_column(String(128))
    """S256 of the verifier that the client (portal, `pai login`) must show to get the token."""
    code_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    """SHA-256 of the login code handed to the client, once the provider vouched for the user."""
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(index=True)


class GroupUserLimit(Timestamped, Base):
    """An administrator's limit for each member of a group in one VC: it replaces the VC's
    default `userLimit` for them (see `pai.scheduler.userlimits`). None: no limit on that."""

    __tablename__ = "group_user_limits"
    __table_args__ = (UniqueConstraint("group_id", "virtual_cluster"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"))
    virtual_cluster: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[float | None] = mapped_column(Float)
    cpus: Mapped[float | None] = mapped_column(Float)
    jobs: Mapped[int | None] = mapped_column()
    set_by: Mapped[str] = mapped_column(String(64))
    """The administrator who set it last."""

    group: Mapped[Group] = relationship()


class IdentityEpoch(Base):
    """One row whose `epoch` triggers raise whenever users, groups or memberships change or a
    token is deleted (migration 0008): what was read about a token's bearer holds while the
    epoch is unchanged."""

    __tablename__ = "identity_epoch"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(BigInteger)


class JobRow(Base):
    """A submitted job. The API writes the row and the user's intents (stop); only the
    controller writes `status` and the columns derived from it (state, times, exit code)."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("username", "name"),
        # The job list's filters, newest first (migration 0003 explains them).
        Index("ix_jobs_username_submitted_at", "username", "submitted_at"),
        Index("ix_jobs_state_submitted_at", "state", "submitted_at"),
        Index(
            "ix_jobs_virtual_cluster_state_submitted_at", "virtual_cluster", "state", "submitted_at"
        ),
        # The controller's look-ups: jobs not taken in yet, pending stop requests.
        Index(
            "ix_jobs_untaken",
            "id",
            sqlite_where=text("status IS NULL"),
            postgresql_where=text("status IS NULL"),
        ),
        Index("ix_jobs_stop_requests", "execution_type", "stop_requested_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255))
    virtual_cluster: Mapped[str] = mapped_column(String(64))
    priority_class: Mapped[str] = mapped_column(String(8))
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    job_text: Mapped[str] = mapped_column(Text)
    """The YAML as submitted, with secret values masked: what `GET .../config` returns."""
    spec: Mapped[dict[str, Any]] = mapped_column()
    """The parsed job (OpenPAI JSON form) with secret values masked."""
    sealed_secrets: Mapped[str | None] = mapped_column(Text)
    """The job's secrets, encrypted with the cluster key; opened only to launch a task."""
    total_tasks: Mapped[int] = mapped_column()
    total_gpus: Mapped[int] = mapped_column()
    total_roles: Mapped[int] = mapped_column()
    stop_requested_at: Mapped[datetime | None] = mapped_column()
    submission_id: Mapped[str | None] = mapped_column(String(64))
    """The client's name for the submission (`X-PAI-Submission-Id`): the same submission sent
    again is answered as accepted, not as a conflict."""

    # Written by the controller only.
    state: Mapped[str] = mapped_column(String(16), default="WAITING")
    sub_state: Mapped[str] = mapped_column(String(32), default="AttemptCreationPending")
    execution_type: Mapped[str] = mapped_column(String(8), default="START")
    launched_at: Mapped[datetime | None] = mapped_column()
    completed_at: Mapped[datetime | None] = mapped_column(index=True)
    retries: Mapped[int] = mapped_column(default=0)
    exit_code: Mapped[int | None] = mapped_column()
    status: Mapped[dict[str, Any] | None] = mapped_column()
    """The state machine (`pai.orchestrator.framework.Job.to_dict`); None until the controller
    has taken the job in."""
    allocations: Mapped[list[Any]] = mapped_column(default=list)
    """The scheduler's placements of the job's running groups, replayed after a restart."""
    wait_reason: Mapped[dict[str, Any] | None] = mapped_column()

    tags: Mapped[list[JobTag]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="JobTag.tag"
    )

    @property
    def framework_name(self) -> str:
        return f"{self.username}~{self.name}"


class JobCount(Base):
    """How many jobs each user has in each VC and state, kept by triggers on `jobs` in the
    same transaction as every change, so that a job list's total count sums a few of these
    rows instead of counting a million jobs (see migration 0007)."""

    __tablename__ = "job_counts"

    username: Mapped[str] = mapped_column(String(64), primary_key=True)
    virtual_cluster: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column()


class JobTag(Base):
    __tablename__ = "job_tags"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(255), primary_key=True, index=True)


class JobEvent(Base):
    """Something that happened to a job, shown by `GET .../events` (OpenPAI's pod events)."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    type: Mapped[str] = mapped_column(String(8))
    """Normal or Warning."""
    reason: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    role: Mapped[str | None] = mapped_column(String(255))
    task_index: Mapped[int | None] = mapped_column()


class UsageSample(Base):
    """What a task, a node or a VC used at one moment. Samples older than the monitor's raw
    window are averaged into coarser ones (`resolution` seconds each) and dropped after the
    retention."""

    __tablename__ = "usage_samples"
    __table_args__ = (Index("ix_usage_samples_scope_name_at", "scope", "name", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(index=True)
    scope: Mapped[str] = mapped_column(String(8))
    """task, node or vc."""
    name: Mapped[str] = mapped_column(String(255))
    """The job's framework name (user~job), the node's name or the VC's name."""
    role: Mapped[str | None] = mapped_column(String(255))
    task_index: Mapped[int | None] = mapped_column()
    node: Mapped[str | None] = mapped_column(String(255))
    resolution: Mapped[int] = mapped_column()
    cpu_percent: Mapped[float | None] = mapped_column(Float)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_limit_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """A task's memory limit, or a node's total memory."""
    read_bytes: Mapped[int | None] = mapped_column(BigInteger)
    write_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_percent: Mapped[float | None] = mapped_column(Float)
    gpu_memory_percent: Mapped[float | None] = mapped_column(Float)
    used: Mapped[float | None] = mapped_column(Float)
    """A VC's leaf cells (GPUs or CPU slots) in use by its jobs."""
    total: Mapped[float | None] = mapped_column(Float)
    """A VC's guaranteed leaf cells."""


class Alert(Base):
    """An alert Alertmanager sent: one row per alert and start, updated when it resolves."""

    __tablename__ = "alerts"
    __table_args__ = (UniqueConstraint("fingerprint", "starts_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16))
    """firing or resolved."""
    severity: Mapped[str] = mapped_column(String(16))
    labels: Mapped[dict[str, Any]] = mapped_column()
    annotations: Mapped[dict[str, Any]] = mapped_column()
    starts_at: Mapped[datetime] = mapped_column()
    ends_at: Mapped[datetime | None] = mapped_column()
    received_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    actions: Mapped[list[AlertAction]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="AlertAction.id"
    )


class AlertAction(Base):
    """An action an alert caused (or tried to): who it was for, and how it went."""

    __tablename__ = "alert_actions"

    id: Mapped[int] = mapped_column(primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), index=True)
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(255))
    """The job (framework name), the node, or the address an e-mail went to."""
    status: Mapped[str] = mapped_column(String(8))
    """done, skipped (done within the repeat interval already) or failed."""
    message: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(default=utcnow)


class NodeCordon(Base):
    """A node the scheduler places nothing new on until an administrator uncordons it."""

    __tablename__ = "node_cordons"

    node: Mapped[str] = mapped_column(String(255), primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    by: Mapped[str] = mapped_column(String(255))
    """The administrator, or `alert <name>`."""
    reason: Mapped[str] = mapped_column(Text)


class NodeEvent(Base):
    """Something that happened to a node: cordoned, uncordoned (by whom, why)."""

    __tablename__ = "node_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    node: Mapped[str] = mapped_column(String(255), index=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    type: Mapped[str] = mapped_column(String(8))
    reason: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)


class ControllerLease(Base):
    """Which controller acts: one row, held by one controller at a time until it expires.
    `epoch` grows with each new holder, so a holder that lost the lease can tell."""

    __tablename__ = "controller_lease"

    id: Mapped[int] = mapped_column(primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    address: Mapped[str] = mapped_column(String(255))
    """Where the holder serves the control plane's internal API (logs, cluster state)."""
    epoch: Mapped[int] = mapped_column()
    acquired_at: Mapped[datetime] = mapped_column()
    expires_at: Mapped[datetime] = mapped_column()
    state: Mapped[str] = mapped_column(Text, default="", deferred=True)
    """The holder's cluster and its state after its last pass (JSON), which API workers in
    other processes show. Deferred: renewing the lease need not load it."""
    state_version: Mapped[int] = mapped_column(default=0, server_default="0")
    """Raised at each publication of `state`: a reader compares it before reading the state."""


class RateWindow(Base):
    """How many events of a rate limit (`scope`) one key had in one window of the limit's
    period; the database holds them so that every API worker counts against the same limit."""

    __tablename__ = "rate_windows"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(320), primary_key=True)
    window: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    """The window's start, in periods since the epoch."""
    count: Mapped[int] = mapped_column()


class StoreIdentity(Base):
    """One row naming this store: a random id made once, by the migration that created the
    table (0012). What PAI leaves outside the database (a Ray node's task directories, its
    agents' names) carries it, so that another installation, or this one after its store was
    reset, never mistakes that state for its own."""

    __tablename__ = "store_identity"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    store_id: Mapped[str] = mapped_column(String(32))
