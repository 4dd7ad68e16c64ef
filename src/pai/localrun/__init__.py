"""`pai run`: a job file run on this machine, with no server, as PAI's nodes would run it.

The job's state machine (`pai.orchestrator.framework`), its launches (`pai.orchestrator.launching`)
and the node's executor (`pai.executors.local`) are the platform's own; this package only places
every task on its own loopback address of this machine, follows the tasks' output and says where
the run cannot be what the cluster would do.
"""
