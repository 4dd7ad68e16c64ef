"""Sandboxes that tests, benchmarks and trials build on one machine: a Ray cluster of network
namespaces (`ray`) and a container runtime with its own registry (`containers`)."""
