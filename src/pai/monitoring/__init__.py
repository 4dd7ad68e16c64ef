"""Prometheus metrics, alert rules and alert actions."""
