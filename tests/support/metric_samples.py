"""Prometheus text read back as samples, for tests that check what `/metrics` says."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metric_samples(text: str) -> Samples:
    """Every sample of a Prometheus exposition, keyed by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metric_value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; KeyError when the exposition has no such sample."""
    return samples[(name, tuple(sorted(labels.items())))]
