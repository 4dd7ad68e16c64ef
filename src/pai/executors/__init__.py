"""Where tasks run: the `Executor` protocol (`base`) and its engines (`local`, `ray`,
`simulated`), the launch path below them on a node (`node`, `isolation`), and the sandboxes
that tests and benchmarks build (`sandboxes`)."""
