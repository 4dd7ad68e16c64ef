"""Where tasks run: the Executor protocol and its local, Kubernetes and simulated backends."""
