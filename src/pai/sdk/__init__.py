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
"""

from pai.sdk.client import Client, log_in
from pai.sdk.cluster import (
    CellCount,
    Counts,
    LeafUsage,
    Node,
    NodeVcUsage,
    Resources,
    SharedGpu,
    SharedTask,
    SkuType,
    VirtualCluster,
)
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
    ServerUnavailableError,
    UnauthorizedError,
    WaitTimeoutError,
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
from pai.sdk.storage import AuditEvent, FileEntry, FileListing, Storage, StorageQuota, UploadStatus
from pai.sdk.submission import JobSource

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
    "VirtualCluster",
    "WaitReason",
    "WaitTimeoutError",
    "config_path",
    "load_config",
    "log_in",
    "save_config",
]
