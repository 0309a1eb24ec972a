"""The work queue: per-session streams, scheduling, leases, the arq worker and pool."""
