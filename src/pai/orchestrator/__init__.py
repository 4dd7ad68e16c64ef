"""Job and task state machines (pure) and the controller, the only writer of job state."""
