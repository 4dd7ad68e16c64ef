"""Engines whose nodes each run an agent that the control plane calls.

`AgentExecutor` (`.executor`) is the control plane's side, the same for every such engine: one
link per node of the cluster file, the task attempts on each, the calls to each node's agent
(`info`, `set_exit_spec`, `launch`, `kill`, `poll(ack)`, `recover`) with their timeouts, and
giving up the tasks of a node that stays silent. A `Fleet` (`.fleet`) is what differs between
engines: which nodes are live, how an agent is started on one, and how calls reach it and come
back. `.wire` holds what agents answer. The Ray engine (`pai.executors.ray`) and the hollow
engine (`pai.executors.hollow`) are the two fleets.
"""
