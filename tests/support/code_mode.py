"""The bundled `code` mode's vocabulary, as the mode tests expect it (in file order)."""

from __future__ import annotations

CODE_TYPES = (
    "bugfix",
    "feature",
    "refactor",
    "change",
    "discovery",
    "decision",
    "security_alert",
    "security_note",
    "sensitive",
)
CODE_CONCEPTS = (
    "how-it-works",
    "why-it-exists",
    "what-changed",
    "problem-solution",
    "gotcha",
    "pattern",
    "trade-off",
)
