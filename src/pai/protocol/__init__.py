"""The OpenPAI job protocol v2: models, parsing with located errors, rendering, masking.

Typical use: `spec = parse_job(text)` (raises ProtocolError listing every problem with its line),
then `render_commands(spec, role)` for what a role runs, `rendered_job_dict(spec)` to store it,
`masked_job_text(text)` / `masked_job_dict(spec)` to show it, and `substitute_secrets` only when a
task starts.
"""

from pai.protocol.errors import Problem, ProtocolError
from pai.protocol.extras import (
    Extras,
    HivedSchedulerExtras,
    HivedTaskRole,
    JobStatusChangeNotification,
    PriorityClass,
    RuntimePlugin,
    StorageRef,
)
from pai.protocol.job import Defaults, Deployment, DeploymentRole, JobSpec
from pai.protocol.masking import (
    SECRET_MASK,
    masked_job_dict,
    masked_job_text,
    registry_passwords_as_secrets,
)
from pai.protocol.names import kubernetes_name
from pai.protocol.parser import SubmittedJob, field_problem, parse_job, parse_submitted_job
from pai.protocol.plugins import runtime_plugins_for_role
from pai.protocol.prerequisites import (
    DataPrerequisite,
    DockerAuth,
    DockerImagePrerequisite,
    OutputPrerequisite,
    Prerequisite,
    PrerequisiteType,
    ScriptPrerequisite,
)
from pai.protocol.render import (
    render_commands,
    render_text,
    rendered_job_dict,
    secret_names,
    substitute_secrets,
)
from pai.protocol.schema import job_json_schema
from pai.protocol.taskrole import Completion, ExtraContainerOptions, ResourcePerInstance, TaskRole
from pai.protocol.yaml_tree import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_EXPANDED_CHARACTERS,
    MAX_NODES,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_EXPANDED_CHARACTERS",
    "MAX_NODES",
    "SECRET_MASK",
    "Completion",
    "DataPrerequisite",
    "Defaults",
    "Deployment",
    "DeploymentRole",
    "DockerAuth",
    "DockerImagePrerequisite",
    "ExtraContainerOptions",
    "Extras",
    "HivedSchedulerExtras",
    "HivedTaskRole",
    "JobSpec",
    "JobStatusChangeNotification",
    "OutputPrerequisite",
    "Prerequisite",
    "PrerequisiteType",
    "PriorityClass",
    "Problem",
    "ProtocolError",
    "ResourcePerInstance",
    "RuntimePlugin",
    "ScriptPrerequisite",
    "StorageRef",
    "SubmittedJob",
    "TaskRole",
    "field_problem",
    "job_json_schema",
    "kubernetes_name",
    "masked_job_dict",
    "masked_job_text",
    "parse_job",
    "parse_submitted_job",
    "registry_passwords_as_secrets",
    "render_commands",
    "render_text",
    "rendered_job_dict",
    "runtime_plugins_for_role",
    "secret_names",
    "substitute_secrets",
]
