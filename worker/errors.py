"""Errors raised by the worker side; each message is one line a user can act on."""

from __future__ import annotations


class WorkerError(Exception):
    """Base class of every error the worker side raises."""


class ConfigError(WorkerError):
    """The settings (environment or settings file) are invalid or incomplete."""


class RedisUnavailableError(WorkerError):
    """Redis could not be reached or started."""


class BackpressureError(WorkerError):
    """A session's stream holds too many unprocessed events; publishing is refused."""
