"""Prerequisites: the Docker images, code, data and outputs that task roles select by name."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from pai.protocol.base import ComponentHeader, OpenProtocolModel

PrerequisiteType = Literal["dockerimage", "script", "output", "data"]
FailurePolicy = Literal["ignore", "fail"]

RUNTIME_PLUGIN_PREFIX = "com.microsoft.pai.runtimeplugin."
"""A prerequisite whose `plugin` starts with this is a runtime plugin; the rest is its name."""


class DockerAuth(OpenProtocolModel):
    """Credentials for a private registry."""

    username: str | None = Field(default=None, description="Registry user name.")
    password: str | None = Field(
        default=None,
        description="Registry password. Write it as a secret reference (<% $secrets.name %>).",
    )
    registryuri: str | None = Field(
        default=None, description="Registry address; Docker Hub when absent."
    )


class DockerImagePrerequisite(ComponentHeader):
    """The image a task role runs in. OpenPAI rejects any key not listed here."""

    type: Literal["dockerimage"] = Field(description="Prerequisite kind.")
    uri: str = Field(description="Image reference, e.g. python:3.11.")
    auth: DockerAuth | None = Field(default=None, description="Private registry credentials.")


class _PluginCapablePrerequisite(ComponentHeader):
    """Script, output and data prerequisites: extra keys are kept as plugin parameters."""

    model_config = ConfigDict(extra="allow")

    plugin: str | None = Field(
        default=None,
        description=(
            "Plugin that provides this prerequisite; com.microsoft.pai.runtimeplugin.<name> makes "
            "it a runtime plugin whose other keys are its parameters."
        ),
    )
    require: list[str] | None = Field(
        default=None, description="Names of prerequisites this one needs."
    )
    failure_policy: FailurePolicy | None = Field(
        default=None, description="For runtime plugins: fail the task (default) or ignore errors."
    )

    @property
    def runtime_plugin_name(self) -> str | None:
        """The runtime plugin this prerequisite stands for, if it is one."""
        if self.plugin is not None and self.plugin.startswith(RUNTIME_PLUGIN_PREFIX):
            return self.plugin.removeprefix(RUNTIME_PLUGIN_PREFIX)
        return None


class ScriptPrerequisite(_PluginCapablePrerequisite):
    """Code a task role uses; available to its commands as $script."""

    type: Literal["script"] = Field(description="Prerequisite kind.")
    uri: str | None = Field(default=None, description="Where the code lives.")


class OutputPrerequisite(_PluginCapablePrerequisite):
    """Where a task role writes its results; available to its commands as $output."""

    type: Literal["output"] = Field(description="Prerequisite kind.")
    uri: str | None = Field(default=None, description="Where outputs go.")


class DataPrerequisite(_PluginCapablePrerequisite):
    """Data a task role reads; available to its commands as $data ($data.uri[0] and so on)."""

    type: Literal["data"] = Field(description="Prerequisite kind.")
    uri: list[str] | None = Field(default=None, description="Locations of the data (a list).")


Prerequisite = Annotated[
    DockerImagePrerequisite | ScriptPrerequisite | OutputPrerequisite | DataPrerequisite,
    Field(discriminator="type"),
]
