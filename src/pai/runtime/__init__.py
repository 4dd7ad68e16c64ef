"""What a task sees: PAI_* environment, ports, the exit spec and failure classification."""
