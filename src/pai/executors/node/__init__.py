"""What runs on a node below an engine: a task's supervisor, the launcher that forks it, the
files they share with the executor, the task's capped logs and its usage readings."""
