"""Settings from PAI_* environment variables, with errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai.errors import ConfigurationError
from pai.settings import Settings


def test_defaults_put_everything_under_pai_home(tmp_path: Path) -> None:
    settings = Settings.from_env({"PAI_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.database_url == f"sqlite:///{tmp_path / 'pai.db'}"
    assert (settings.admin_password, settings.secret_key) == (None, None)
    assert (settings.token_max_expiration, settings.login_rate_limit) == (604800, 20)
    assert (settings.submission_rate_limit, settings.log_level) == (20_000, "INFO")
    assert (settings.engine, settings.ray_node_dir) == ("local", Path("/tmp/pai-node"))
    assert settings.alert_actions_path == tmp_path / "alert-actions.yaml"


def test_every_variable_is_read(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "PAI_HOME": str(tmp_path),
            "PAI_DATABASE_URL": "postgresql+psycopg://pai@127.0.0.1/pai",
            "PAI_ADMIN_PASSWORD": "initial-pw",
            "PAI_SECRET_KEY": "s" * 32,
            "PAI_TOKEN_MAX_EXPIRATION": "3600",
            "PAI_LOGIN_RATE_LIMIT": "5",
            "PAI_SUBMISSION_RATE_LIMIT": "100",
            "PAI_LOG_LEVEL": "debug",
            "PAI_ENGINE": "Ray",
            "PAI_RAY_ADDRESS": "10.0.0.1:6379",
            "PAI_RAY_NAMESPACE": "team-a",
            "PAI_RAY_NODE_DIR": "/var/lib/pai",
            "PAI_MONITOR_INTERVAL": "2.5",
            "PAI_MONITOR_RETENTION_DAYS": "30",
            "PAI_ALERT_ACTIONS": "/etc/pai/actions.yaml",
            "PAI_PUBLIC_URL": "https://pai.example.com",
        }
    )
    assert settings.database_url == "postgresql+psycopg://pai@127.0.0.1/pai"
    assert (settings.admin_password, settings.secret_key) == ("initial-pw", "s" * 32)
    assert (settings.token_max_expiration, settings.login_rate_limit) == (3600, 5)
    assert (settings.submission_rate_limit, settings.log_level) == (100, "DEBUG")
    assert (settings.engine, settings.ray_address) == ("ray", "10.0.0.1:6379")
    assert (settings.ray_namespace, settings.ray_node_dir) == ("team-a", Path("/var/lib/pai"))
    assert (settings.monitor_interval, settings.monitor_retention_days) == (2.5, 30)
    assert settings.alert_actions_path == Path("/etc/pai/actions.yaml")
    assert settings.public_url == "https://pai.example.com"


def test_the_hollow_engine_is_set_from_its_variables(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "PAI_HOME": str(tmp_path),
            "PAI_ENGINE": "hollow",
            "PAI_HOLLOW_NODES": "5000",
            "PAI_HOLLOW_GPUS": "4",
            "PAI_HOLLOW_CPUS": "64",
            "PAI_HOLLOW_MEMORY_GB": "512",
            "PAI_HOLLOW_LOSS": "0.01",
            "PAI_HOLLOW_LOSS_EVERY": "120",
        }
    )
    assert (settings.engine, settings.hollow_nodes, settings.hollow_gpus) == ("hollow", 5000, 4)
    assert (settings.hollow_cpus, settings.hollow_memory_gb) == (64, 512)
    assert (settings.hollow_loss, settings.hollow_loss_every) == (0.01, 120)
    defaults = Settings.from_env({"PAI_HOME": str(tmp_path)})
    assert (defaults.hollow_cpus, defaults.hollow_memory_gb, defaults.hollow_loss) == (
        None,
        None,
        0,
    )


def test_secrets_stay_out_of_the_repr(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"PAI_HOME": str(tmp_path), "PAI_ADMIN_PASSWORD": "initial-pw", "PAI_SECRET_KEY": "s" * 32}
    )
    assert "initial-pw" not in repr(settings)
    assert "s" * 32 not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PAI_LOGIN_RATE_LIMIT", "many", "PAI_LOGIN_RATE_LIMIT: expected an integer, got 'many'"),
        ("PAI_SUBMISSION_RATE_LIMIT", "0", "PAI_SUBMISSION_RATE_LIMIT: must be a positive"),
        ("PAI_TOKEN_MAX_EXPIRATION", "30", "PAI_TOKEN_MAX_EXPIRATION: must be at least 60"),
        ("PAI_ADMIN_PASSWORD", "abc", "PAI_ADMIN_PASSWORD: must be at least 6 characters"),
        ("PAI_SECRET_KEY", "short", "PAI_SECRET_KEY: must be at least 32 characters"),
        ("PAI_LOG_LEVEL", "loud", "PAI_LOG_LEVEL: must be one of"),
        ("PAI_ENGINE", "slurm", "PAI_ENGINE: must be one of local, ray, hollow, got 'slurm'"),
        ("PAI_ENGINE", "ray", "PAI_RAY_ADDRESS: the Ray engine needs the address"),
        ("PAI_RAY_NODE_DIR", "pai-node", "PAI_RAY_NODE_DIR: must be an absolute path"),
        ("PAI_RAY_NODE_TIMEOUT", "0.5", "PAI_RAY_NODE_TIMEOUT: must be between 1 and 3600"),
        ("PAI_STORE_WAIT_SECONDS", "-1", "PAI_STORE_WAIT_SECONDS: must be between 0 and 3600"),
        (
            "PAI_TRUSTED_PROXIES",
            "10.0.0.5, proxy.example",
            "PAI_TRUSTED_PROXIES: 'proxy.example' is not an IP address or network",
        ),
        ("PAI_HOLLOW_NODES", "-1", "PAI_HOLLOW_NODES: must be a number of nodes >= 0"),
        ("PAI_HOLLOW_CPUS", "lots", "PAI_HOLLOW_CPUS: expected an integer, got 'lots'"),
        ("PAI_HOLLOW_LOSS", "1.5", "PAI_HOLLOW_LOSS: must be a share of the nodes, 0 to 1"),
        ("PAI_HOLLOW_LOSS_EVERY", "0", "PAI_HOLLOW_LOSS_EVERY: must be between 1 and 86400"),
        ("PAI_MONITOR_INTERVAL", "often", "PAI_MONITOR_INTERVAL: expected a number, got 'often'"),
        ("PAI_MONITOR_INTERVAL", "0", "PAI_MONITOR_INTERVAL: must be between 0.1 and 3600"),
        ("PAI_MONITOR_RETENTION_DAYS", "0", "PAI_MONITOR_RETENTION_DAYS: must be a positive"),
    ],
)
def test_a_bad_value_names_its_variable(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        Settings.from_env({"PAI_HOME": str(tmp_path), variable: value})
    assert str(error.value).startswith(message)
