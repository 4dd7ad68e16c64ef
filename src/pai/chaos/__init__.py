"""Chaos runs: PAI under a seeded storm of faults, and a checker of what it promises.

A run builds a cluster (`run`), drives a stream of jobs of known outcome through it
(`workload`) while faults come and go (`schedule`, `faults`), writes everything that happened
to a history (`history`), and `checker` proves from that history alone that nothing accepted
was lost, no two runs of a task overlapped and nothing was left behind.
"""
