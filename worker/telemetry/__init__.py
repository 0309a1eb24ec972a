"""Counting outcomes: fleet-wide counters in Redis and this process' Prometheus metrics."""
