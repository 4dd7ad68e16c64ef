"""The hollow engine: thousands of emulated nodes behind PAI's real control plane.

`pai up --engine hollow --hollow-nodes N` runs the API, the controller, the scheduler and the
store as they run for a real cluster, against N nodes that run nothing (`.cluster` names and
addresses them). Each node has an agent that answers the control plane's calls as a Ray node's
agent does (`.agent`), reached through a fleet that answers in this process (`.fleet`); the
control plane's side is the Ray engine's own (`pai.executors.agents.executor`). A task is
running once its node has started it, lasts as its commands' first `sleep` says and ends with
their trailing `exit` code (`.plan`). What differs from real nodes: tasks write no output (their
runtime log says what the task does), nodes report no usage, and the nodes live in the
control plane's process, so restarting it restarts them (their tasks are then lost and retried).
"""
