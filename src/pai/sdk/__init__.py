"""A typed Python client of the PAI REST API.

    from pathlib import Path
    from pai.sdk import Client, NotFoundError

    client = Client.from_config()            # the server and token `pai login` saved
    submitted = client.submit(Path("examples/jobs/hello-world.yaml"))
    job = client.wait(submitted.name, timeout=600)
    print(job.state)                         # SUCCEEDED
    print(client.logs(submitted.name, stream="stdout"))

Objects returned are pydantic models whose attributes are the API's JSON field names in
snake_case (`job.job_status.app_exit_code`); `obj.raw()` gives the JSON back. Errors are
`PaiError` subclasses by OpenPAI error code family.

Importing `pai.sdk` is cheap: the errors and the configuration come at once, every other name
from its module when first used (PEP 562), so that a program that needs only the errors does
not load the client's HTTP stack and models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pai.sdk.config import ClientConfig, Credentials, config_path, load_config, save_config
from pai.sdk.errors import (
    ConfigError,
    ConflictError,
    ForbiddenError,
    InvalidArgumentError,
    InvalidProtocolError,
    InvalidRequestError,
    NotFoundError,
    PaiError,
    RateLimitedError,
    ServerNotTrustedError,
    ServerUnavailableError,
    UnauthorizedError,
    WaitTimeoutError,
)

if TYPE_CHECKING:
    from pai.sdk.client import Client, log_in
    from pai.sdk.cluster import (
        CellCount,
        Counts,
        GroupUserLimit,
        LeafUsage,
        Node,
        NodeVcUsage,
        Resources,
        SharedGpu,
        SharedTask,
        SkuType,
        UserLimit,
        VcUser,
        VcUserLimits,
        VcUsers,
        VirtualCluster,
    )
    from pai.sdk.identity import Group, LoginResult, ServerInfo, TokenCheck, TokenInfo, User
    from pai.sdk.job_models import (
        FINAL_STATES,
        ExitSpec,
        JobDetail,
        JobEvent,
        JobInfo,
        JobStatus,
        JobSubmission,
        LogLocation,
        RetryDetails,
        TaskAttempt,
        TaskAttempts,
        TaskRoleDetail,
        TaskStatus,
        WaitReason,
    )
    from pai.sdk.logs import LogStream
    from pai.sdk.market import MarketItem
    from pai.sdk.storage import (
        AuditEvent,
        FileEntry,
        FileListing,
        Storage,
        StorageQuota,
        UploadStatus,
    )
    from pai.sdk.submission import JobSource

_HOMES = {
    "pai.sdk.client": ("Client", "log_in"),
    "pai.sdk.cluster": (
        "CellCount",
        "Counts",
        "GroupUserLimit",
        "LeafUsage",
        "Node",
        "NodeVcUsage",
        "Resources",
        "SharedGpu",
        "SharedTask",
        "SkuType",
        "UserLimit",
        "VcUser",
        "VcUserLimits",
        "VcUsers",
        "VirtualCluster",
    ),
    "pai.sdk.identity": ("Group", "LoginResult", "ServerInfo", "TokenCheck", "TokenInfo", "User"),
    "pai.sdk.job_models": (
        "FINAL_STATES",
        "ExitSpec",
        "JobDetail",
        "JobEvent",
        "JobInfo",
        "JobStatus",
        "JobSubmission",
        "LogLocation",
        "RetryDetails",
        "TaskAttempt",
        "TaskAttempts",
        "TaskRoleDetail",
        "TaskStatus",
        "WaitReason",
    ),
    "pai.sdk.logs": ("LogStream",),
    "pai.sdk.market": ("MarketItem",),
    "pai.sdk.storage": (
        "AuditEvent",
        "FileEntry",
        "FileListing",
        "Storage",
        "StorageQuota",
        "UploadStatus",
    ),
    "pai.sdk.submission": ("JobSource",),
}
"""Where each name imported on first use is defined."""
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "FINAL_STATES",
    "AuditEvent",
    "CellCount",
    "Client",
    "ClientConfig",
    "ConfigError",
    "ConflictError",
    "Counts",
    "Credentials",
    "ExitSpec",
    "FileEntry",
    "FileListing",
    "ForbiddenError",
    "Group",
    "GroupUserLimit",
    "InvalidArgumentError",
    "InvalidProtocolError",
    "InvalidRequestError",
    "JobDetail",
    "JobEvent",
    "JobInfo",
    "JobSource",
    "JobStatus",
    "JobSubmission",
    "LeafUsage",
    "LogLocation",
    "LogStream",
    "LoginResult",
    "MarketItem",
    "Node",
    "NodeVcUsage",
    "NotFoundError",
    "PaiError",
    "RateLimitedError",
    "Resources",
    "RetryDetails",
    "ServerInfo",
    "ServerNotTrustedError",
    "ServerUnavailableError",
    "SharedGpu",
    "SharedTask",
    "SkuType",
    "Storage",
    "StorageQuota",
    "TaskAttempt",
    "TaskAttempts",
    "TaskRoleDetail",
    "TaskStatus",
    "TokenCheck",
    "TokenInfo",
    "UnauthorizedError",
    "UploadStatus",
    "User",
    "UserLimit",
    "VcUser",
    "VcUserLimits",
    "VcUsers",
    "VirtualCluster",
    "WaitReason",
    "WaitTimeoutError",
    "config_path",
    "load_config",
    "log_in",
    "save_config",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and then kept."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
