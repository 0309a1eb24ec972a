"""Errors raised by the pure pipeline; each message is one line a user can act on."""

from __future__ import annotations


class PipelineError(Exception):
    """Base class of every error the pipeline raises."""


class EventDecodeError(PipelineError):
    """An event on the wire is malformed: bad JSON, a missing field, a wrong type."""


class ModeError(PipelineError):
    """A mode file is missing, unreadable, or would produce an unusable mode."""


class ModeNotFoundError(ModeError):
    """No mode file exists for the requested id in any searched directory."""
