"""What separates a task from its node: the policy a node resolves (`policy`), and the two
ways a supervisor starts a task, on the host (`host`, storages through `mounts`) or in a
container of its image (`container`, through the node's runtime, `runtime`, and `images`)."""
