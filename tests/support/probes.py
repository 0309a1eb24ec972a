"""Reading a worker's /readyz and /metrics the way an operator's probe and scraper do."""

from __future__ import annotations

import urllib.error
import urllib.request


def probe(url: str) -> tuple[int, str]:
    """(status, body) of a GET; (0, error) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def sample(metrics: str, name: str) -> float:
    """The value of an unlabelled sample in Prometheus text (0 when absent)."""
    for line in metrics.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return 0.0
