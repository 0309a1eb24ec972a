"""Errors raised by the worker side; each message is one line a user can act on."""

from __future__ import annotations


class WorkerError(Exception):
    """Base class of every error the worker side raises."""


class LeaseLostError(WorkerError):
    """The session's lease is no longer this holder's: it expired or another worker took it over.

    One error whoever noticed: the lease's renewal, Redis refusing a guarded ack or dead-letter,
    or storage refusing a write whose fence is older than its own. The holder stops writing.
    """

    def __init__(self, message: str, stored_fence: int = 0) -> None:
        super().__init__(message)
        # The fence storage holds, when storage refused (0 otherwise): a Redis that lost its
        # fence counter must hand out tokens above it (queue.leases.raise_fence_floor).
        self.stored_fence = stored_fence


class ConfigError(WorkerError):
    """The settings (environment or settings file) are invalid or incomplete."""


class RedisUnavailableError(WorkerError):
    """Redis could not be reached or started."""


class BackpressureError(WorkerError):
    """A session's stream holds too many unprocessed events; publishing is refused."""
