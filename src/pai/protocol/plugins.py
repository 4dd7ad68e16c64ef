"""The runtime plugins a role's tasks run, gathered as OpenPAI's runtime gathers them."""

from __future__ import annotations

from pai.protocol.extras import RuntimePlugin
from pai.protocol.job import JobSpec
from pai.protocol.prerequisites import DockerImagePrerequisite
from pai.protocol.render import render_nested

_NOT_PARAMETERS = {
    # what the prerequisite is, rather than how the plugin is configured
    "protocol_version",
    "name",
    "version",
    "contributor",
    "description",
    "type",
    "plugin",
    "failure_policy",
    "require",
}


def runtime_plugins_for_role(spec: JobSpec, role: str) -> list[RuntimePlugin]:
    """The role's runtime plugins in the order they run.

    First the role's own `prerequisites` that are runtime plugins (`plugin:
    com.microsoft.pai.runtimeplugin.<name>`), in the order the role lists them, their keys beyond
    the prerequisite's own (name, version, ...) becoming the plugin's parameters; then the
    `extras.com.microsoft.pai.runtimeplugin` entries whose `taskroles` include the role (or that
    have none). References to parameters and the role's
    prerequisites in plugin parameters are resolved; secret references are left for launch.
    Raises KeyError for an unknown role.
    """
    task_role = spec.task_roles[role]
    by_name = {prerequisite.name: prerequisite for prerequisite in spec.prerequisites}
    plugins: list[RuntimePlugin] = []
    for name in task_role.prerequisites:
        prerequisite = by_name.get(name)
        if prerequisite is None or isinstance(prerequisite, DockerImagePrerequisite):
            continue
        plugin_name = prerequisite.runtime_plugin_name
        if plugin_name is None:
            continue
        parameters = prerequisite.model_dump(
            by_alias=True, exclude_none=True, mode="json", exclude=_NOT_PARAMETERS
        )
        plugins.append(
            RuntimePlugin(
                plugin=plugin_name,
                parameters=parameters,
                failure_policy=prerequisite.failure_policy or "fail",
            )
        )
    plugins += [
        plugin
        for plugin in spec.extras.runtime_plugins
        if plugin.taskroles is None or role in plugin.taskroles
    ]
    return [
        plugin.model_copy(update={"parameters": render_nested(plugin.parameters, spec, role)})
        for plugin in plugins
    ]
