"""The Ray engine: PAI's tasks on the machines of a Ray cluster.

PAI keeps every decision (which node, which GPUs, when); Ray carries them out. On each node a
detached, named agent actor, pinned to that node, starts the node's tasks under PAI's supervisor
(`pai.executors.ray.agent`); the control plane's `RayExecutor` sends it launches and stops,
collects what happened and a copy of every task's logs, and watches Ray's node membership
(`pai.executors.agents.executor`, over the Ray fleet of `pai.executors.ray.executor`).
`pai.executors.ray.nodes` matches Ray's nodes to the cluster file. Only `executor` (and the
test sandbox, `pai.executors.sandboxes.ray`) import Ray itself, so the rest loads without the
`ray` extra.
"""
