"""Platform settings, read once from `PAI_*` environment variables.

Every component receives a `Settings` object instead of reading the environment itself, so that
tests (and several servers in one process) can run side by side with different configurations.

- `PAI_HOME`: state directory (SQLite database, cluster secret); default `~/.pai`.
- `PAI_DATABASE_URL`: `sqlite:///<path>` or `postgresql+psycopg://<user>@<host>/<db>`;
  default `sqlite:///$PAI_HOME/pai.db`.
- `PAI_ADMIN_PASSWORD`: password of the `admin` user created on first start; default: generated
  and printed once.
- `PAI_SECRET_KEY`: key that signs tokens (at least 32 characters; API replicas must share it);
  default: generated once into `$PAI_HOME/secret.key` (mode 600).
- `PAI_TOKEN_MAX_EXPIRATION`: longest token lifetime a login may ask for, in seconds; 604800.
- `PAI_LOGIN_RATE_LIMIT`: failed logins per account and client address per minute; 20.
- `PAI_SUBMISSION_RATE_LIMIT`: job submissions per user per hour; 20000.
- `PAI_TRUSTED_PROXIES`: reverse proxies (addresses or networks, comma-separated) whose
  `X-Forwarded-For` names the client; none.
- `PAI_LOG_LEVEL`: DEBUG, INFO, WARNING or ERROR; INFO.
- `PAI_ENGINE`: where tasks run: `local` (processes on this machine, the default), `ray` (the
  machines of a Ray cluster, see docs/deploy.md) or `hollow` (emulated nodes that run nothing,
  to see the control plane at a cluster's size; see `pai.executors.hollow`).
- `PAI_RAY_ADDRESS`: the Ray cluster's head, `HOST:PORT` (required with `PAI_ENGINE=ray`).
- `PAI_RAY_NAMESPACE`: Ray namespace of PAI's agents; `pai`.
- `PAI_RAY_NODE_TIMEOUT`: seconds a node's agent may go without the control plane before it
  stops its tasks, which are then retried elsewhere (Ray and hollow nodes); 30.
- `PAI_HOLLOW_NODES`: how many hollow nodes, without a cluster file (with one: its nodes).
- `PAI_HOLLOW_GPUS`, `PAI_HOLLOW_CPUS`, `PAI_HOLLOW_MEMORY_GB`: the size of each hollow node;
  8 GPUs, 8 CPUs and 64 GiB per GPU.
- `PAI_HOLLOW_LOSS`: the share of hollow nodes (0-1) that goes silent at a time, as behind a
  cut network, every `PAI_HOLLOW_LOSS_EVERY` seconds (60) for as long; 0.
- `PAI_RAY_NODE_DIR`: absolute directory on every Ray node for PAI's agent state and the tasks'
  working and log directories; `/tmp/pai-node`.
- `PAI_MAX_UPLOAD_BYTES`: the largest file a user may upload to a storage; 107374182400 (100 GiB).
- `PAI_MONITOR_INTERVAL`: seconds between two samples of what tasks and nodes use; 5.
- `PAI_MONITOR_RETENTION_DAYS`: days usage history is kept; 7.
- `PAI_ALERT_ACTIONS`: the administrator's alert actions; `$PAI_HOME/alert-actions.yaml`.
- `PAI_PUBLIC_URL`: the portal's address as users reach it, for links in e-mails; none.
- `PAI_CONTROLLER_LEASE_SECONDS`: how long a standby controller waits for a silent one before
  it takes over; 10.
- `PAI_SCHEDULER`: the controller's scheduling policy, `pai` (the default), `hived-oppo` or
  `hived` (see docs/scheduling.md).
- `PAI_SCHEDULER_RESERVE_AFTER`: under `pai`, seconds a job may wait in its VC before cells
  are reserved for it; 3600.
- `PAI_FAIR_SHARE_HALF_LIFE`: fair share between the users of a VC: among waiting jobs of the
  same priority, those of users with less recent GPU time go first, each GPU-second weighing
  half as much after this many seconds; 604800 (a week). `off`: first come, first served.
- `PAI_ISOLATION`: where tasks run on each node: `container` (in their jobs' images; a node
  without a container runtime takes no tasks), `host` (directly on the node) or `auto` (the
  default: containers where podman is installed, else the host). See docs/jobs.md.
- `PAI_CONTAINER_RUNTIME`: the container runtime, `podman`; default: found on the PATH.
- `PAI_TASK_USER`: the user host tasks run as when PAI runs as root; `nobody`.
- `PAI_TASK_PIDS_LIMIT`: the most processes and threads one task's container may have; 8192.
- `PAI_AUTHN_MODE`: how people sign in: `basic` (PAI's own passwords, the default), `oidc` (an
  OpenID Connect provider, `PAI_OIDC_*`) or `ldap` (an LDAP directory, `PAI_LDAP_*`); see
  `pai.authn_settings` and docs/deploy.md. Local administrators keep their passwords in every
  mode.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pai.authn_settings import AuthnSettings
from pai.diskfloor import DiskFloor, DiskFloorError
from pai.errors import ConfigurationError
from pai.executors.isolation.policy import (
    AUTO,
    DEFAULT_PIDS_LIMIT,
    DEFAULT_TASK_USER,
    IsolationError,
    IsolationPolicy,
)
from pai.scheduler.fairshare import DEFAULT_HALF_LIFE_S
from pai.scheduler.pai import DEFAULT_STARVATION_AFTER_S
from pai.scheduler.pai import POLICIES as SCHEDULER_POLICIES

MIN_SECRET_KEY_LENGTH = 32
MIN_PASSWORD_LENGTH = 6
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ENGINES = ("local", "ray", "hollow")
DEFAULT_RAY_NODE_DIR = Path("/tmp/pai-node")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Settings:
    """Everything configurable about one PAI installation; secrets are left out of `repr`."""

    home: Path
    database_url: str
    admin_password: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    token_max_expiration: int = 604800
    login_rate_limit: int = 20
    """Failed logins per account and client address per minute."""
    submission_rate_limit: int = 20_000
    """Job submissions per user per hour: a sweep of a thousand jobs is ordinary."""
    trusted_proxies: tuple[Network, ...] = ()
    """Reverse proxies whose `X-Forwarded-For` names the client (`PAI_TRUSTED_PROXIES`)."""
    log_level: str = "INFO"
    engine: str = "local"
    ray_address: str | None = None
    ray_namespace: str = "pai"
    ray_node_dir: Path = DEFAULT_RAY_NODE_DIR
    ray_node_timeout: float = 30.0
    """How long a Ray node's agent may go without the control plane before it stops its tasks;
    the control plane retries them elsewhere once this and their grace period have passed."""
    hollow_nodes: int = 0
    """Hollow nodes to emulate without a cluster file (0: the cluster file's nodes)."""
    hollow_gpus: int = 8
    hollow_cpus: int | None = None
    hollow_memory_gb: int | None = None
    hollow_loss: float = 0.0
    hollow_loss_every: float = 60.0
    max_upload_bytes: int = 100 * 1024**3
    monitor_interval: float = 5.0
    monitor_retention_days: int = 7
    alert_actions: Path | None = None
    public_url: str = ""
    controller_lease_seconds: float = 10.0
    """How long a controller that stopped renewing keeps the lease before a standby takes over."""
    store_wait_seconds: float = 60.0
    """How long a starting service waits for a store it cannot reach (a restart) before it
    fails with the reason; 0 fails at once."""
    scheduler: str = "pai"
    scheduler_reserve_after: float = DEFAULT_STARVATION_AFTER_S
    fair_share_half_life: float | None = DEFAULT_HALF_LIFE_S
    """None: fair share is off, waiting jobs go first come, first served."""
    isolation: str = AUTO
    container_runtime: str = ""
    task_user: str = DEFAULT_TASK_USER
    task_pids_limit: int = DEFAULT_PIDS_LIMIT
    disk_floor: DiskFloor = field(default_factory=DiskFloor)
    authn: AuthnSettings = field(default_factory=AuthnSettings)
    """How people sign in (`PAI_AUTHN_MODE`, `PAI_OIDC_*`, `PAI_LDAP_*`)."""

    @property
    def isolation_policy(self) -> IsolationPolicy:
        """How every node runs tasks (`pai.executors.isolation.policy`)."""
        return IsolationPolicy(
            self.isolation, self.container_runtime, self.task_user, self.task_pids_limit
        )

    @property
    def alert_actions_path(self) -> Path:
        return self.alert_actions or self.home / "alert-actions.yaml"

    def __post_init__(self) -> None:
        if self.admin_password is not None and len(self.admin_password) < MIN_PASSWORD_LENGTH:
            raise ConfigurationError(
                f"PAI_ADMIN_PASSWORD: must be at least {MIN_PASSWORD_LENGTH} characters long"
            )
        if self.secret_key is not None and len(self.secret_key) < MIN_SECRET_KEY_LENGTH:
            raise ConfigurationError(
                f"PAI_SECRET_KEY: must be at least {MIN_SECRET_KEY_LENGTH} characters long"
            )
        for name, value in (
            ("PAI_TOKEN_MAX_EXPIRATION", self.token_max_expiration),
            ("PAI_LOGIN_RATE_LIMIT", self.login_rate_limit),
            ("PAI_SUBMISSION_RATE_LIMIT", self.submission_rate_limit),
            ("PAI_MAX_UPLOAD_BYTES", self.max_upload_bytes),
        ):
            if value < 1:
                raise ConfigurationError(f"{name}: must be a positive integer, got {value}")
        if self.token_max_expiration < 60:
            raise ConfigurationError("PAI_TOKEN_MAX_EXPIRATION: must be at least 60 seconds")
        if self.log_level not in LOG_LEVELS:
            raise ConfigurationError(
                f"PAI_LOG_LEVEL: must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.scheduler not in SCHEDULER_POLICIES:
            raise ConfigurationError(
                f"PAI_SCHEDULER: must be one of {', '.join(SCHEDULER_POLICIES)}, "
                f"got {self.scheduler!r}"
            )
        if not 0 <= self.scheduler_reserve_after < math.inf:
            raise ConfigurationError(
                "PAI_SCHEDULER_RESERVE_AFTER: must be a number of seconds >= 0, "
                f"got {self.scheduler_reserve_after:g}"
            )
        if self.fair_share_half_life is not None and not 0 < self.fair_share_half_life < math.inf:
            raise ConfigurationError(
                "PAI_FAIR_SHARE_HALF_LIFE: must be a number of seconds > 0, or off, "
                f"got {self.fair_share_half_life:g}"
            )
        if self.engine not in ENGINES:
            raise ConfigurationError(
                f"PAI_ENGINE: must be one of {', '.join(ENGINES)}, got {self.engine!r}"
            )
        if self.engine == "ray" and not self.ray_address:
            raise ConfigurationError(
                "PAI_RAY_ADDRESS: the Ray engine needs the address of the Ray cluster's head, "
                "HOST:PORT (as `ray start --head` printed it)"
            )
        self._check_hollow()
        if not 0.1 <= self.monitor_interval <= 3600:
            raise ConfigurationError(
                f"PAI_MONITOR_INTERVAL: must be between 0.1 and 3600 seconds, "
                f"got {self.monitor_interval:g}"
            )
        if not 1 <= self.ray_node_timeout <= 3600:
            raise ConfigurationError(
                "PAI_RAY_NODE_TIMEOUT: must be between 1 and 3600 seconds, "
                f"got {self.ray_node_timeout:g}"
            )
        if not 0 <= self.store_wait_seconds <= 3600:
            raise ConfigurationError(
                "PAI_STORE_WAIT_SECONDS: must be between 0 and 3600 seconds, "
                f"got {self.store_wait_seconds:g}"
            )
        if not 1 <= self.controller_lease_seconds <= 600:
            raise ConfigurationError(
                "PAI_CONTROLLER_LEASE_SECONDS: must be between 1 and 600 seconds, "
                f"got {self.controller_lease_seconds:g}"
            )
        if self.monitor_retention_days < 1:
            raise ConfigurationError(
                "PAI_MONITOR_RETENTION_DAYS: must be a positive integer, "
                f"got {self.monitor_retention_days}"
            )
        try:
            self.isolation_policy  # noqa: B018 - validates the isolation settings
        except IsolationError as error:
            raise ConfigurationError(str(error)) from None
        if not self.ray_node_dir.is_absolute():
            raise ConfigurationError(
                f"PAI_RAY_NODE_DIR: must be an absolute path (the same on every node), "
                f"got {str(self.ray_node_dir)!r}"
            )

    def _check_hollow(self) -> None:
        if self.hollow_nodes < 0:
            raise ConfigurationError(
                f"PAI_HOLLOW_NODES: must be a number of nodes >= 0, got {self.hollow_nodes}"
            )
        if not 0 <= self.hollow_loss <= 1:
            raise ConfigurationError(
                f"PAI_HOLLOW_LOSS: must be a share of the nodes, 0 to 1, got {self.hollow_loss:g}"
            )
        if not 1 <= self.hollow_loss_every <= 86400:
            raise ConfigurationError(
                "PAI_HOLLOW_LOSS_EVERY: must be between 1 and 86400 seconds, "
                f"got {self.hollow_loss_every:g}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the `PAI_*` variables; a malformed value raises `ConfigurationError` naming it."""
        env = os.environ if environ is None else environ
        home = Path(env.get("PAI_HOME") or Path.home() / ".pai").expanduser()
        return cls(
            home=home,
            database_url=env.get("PAI_DATABASE_URL") or default_database_url(home),
            admin_password=env.get("PAI_ADMIN_PASSWORD") or None,
            secret_key=env.get("PAI_SECRET_KEY") or None,
            token_max_expiration=_int(env, "PAI_TOKEN_MAX_EXPIRATION", cls.token_max_expiration),
            login_rate_limit=_int(env, "PAI_LOGIN_RATE_LIMIT", cls.login_rate_limit),
            submission_rate_limit=_int(env, "PAI_SUBMISSION_RATE_LIMIT", cls.submission_rate_limit),
            trusted_proxies=_networks(env, "PAI_TRUSTED_PROXIES"),
            log_level=(env.get("PAI_LOG_LEVEL") or cls.log_level).upper(),
            engine=(env.get("PAI_ENGINE") or cls.engine).lower(),
            ray_address=env.get("PAI_RAY_ADDRESS") or None,
            ray_namespace=env.get("PAI_RAY_NAMESPACE") or cls.ray_namespace,
            ray_node_dir=Path(env.get("PAI_RAY_NODE_DIR") or DEFAULT_RAY_NODE_DIR),
            ray_node_timeout=_float(env, "PAI_RAY_NODE_TIMEOUT", cls.ray_node_timeout),
            hollow_nodes=_int(env, "PAI_HOLLOW_NODES", cls.hollow_nodes),
            hollow_gpus=_int(env, "PAI_HOLLOW_GPUS", cls.hollow_gpus),
            hollow_cpus=_optional_int(env, "PAI_HOLLOW_CPUS"),
            hollow_memory_gb=_optional_int(env, "PAI_HOLLOW_MEMORY_GB"),
            hollow_loss=_float(env, "PAI_HOLLOW_LOSS", cls.hollow_loss),
            hollow_loss_every=_float(env, "PAI_HOLLOW_LOSS_EVERY", cls.hollow_loss_every),
            max_upload_bytes=_int(env, "PAI_MAX_UPLOAD_BYTES", cls.max_upload_bytes),
            monitor_interval=_float(env, "PAI_MONITOR_INTERVAL", cls.monitor_interval),
            controller_lease_seconds=_float(
                env, "PAI_CONTROLLER_LEASE_SECONDS", cls.controller_lease_seconds
            ),
            store_wait_seconds=_float(env, "PAI_STORE_WAIT_SECONDS", cls.store_wait_seconds),
            monitor_retention_days=_int(
                env, "PAI_MONITOR_RETENTION_DAYS", cls.monitor_retention_days
            ),
            alert_actions=Path(env["PAI_ALERT_ACTIONS"]) if env.get("PAI_ALERT_ACTIONS") else None,
            public_url=env.get("PAI_PUBLIC_URL") or "",
            scheduler=(env.get("PAI_SCHEDULER") or cls.scheduler).lower(),
            scheduler_reserve_after=_float(
                env, "PAI_SCHEDULER_RESERVE_AFTER", cls.scheduler_reserve_after
            ),
            fair_share_half_life=_half_life(env, "PAI_FAIR_SHARE_HALF_LIFE"),
            isolation=(env.get("PAI_ISOLATION") or cls.isolation).lower(),
            container_runtime=(env.get("PAI_CONTAINER_RUNTIME") or "").lower(),
            task_user=env.get("PAI_TASK_USER") or cls.task_user,
            task_pids_limit=_int(env, "PAI_TASK_PIDS_LIMIT", cls.task_pids_limit),
            authn=AuthnSettings.from_env(env),
        )


def default_database_url(home: Path) -> str:
    """The embedded SQLite database inside `home`."""
    return f"sqlite:///{home / 'pai.db'}"


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}: expected an integer, got {raw!r}") from None


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    return _int(env, name, 0) if env.get(name) else None


def _networks(env: Mapping[str, str], name: str) -> tuple[Network, ...]:
    """`10.0.0.5, 10.1.0.0/16, ::1` as networks."""
    networks = []
    for entry in (part.strip() for part in env.get(name, "").split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ConfigurationError(
                f"{name}: {entry!r} is not an IP address or network (give a comma-separated "
                "list such as 10.0.0.5, 10.1.0.0/16)"
            ) from None
    return tuple(networks)


def _disk_floor(env: Mapping[str, str]) -> DiskFloor:
    raw = env.get("PAI_DISK_FLOOR")
    if not raw:
        return DiskFloor()
    try:
        return DiskFloor.parse(raw)
    except DiskFloorError as error:
        raise ConfigurationError(str(error)) from None


def _half_life(env: Mapping[str, str], name: str) -> float | None:
    """Seconds, or None for `off`."""
    if (env.get(name) or "").strip().lower() == "off":
        return None
    return _float(env, name, DEFAULT_HALF_LIFE_S)


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}: expected a number, got {raw!r}") from None
