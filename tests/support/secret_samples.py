"""The secret-redaction corpus of tests/data/secrets: what must be caught, what must not."""

from __future__ import annotations

from pathlib import Path

import msgspec

DATA = Path(__file__).resolve().parent.parent / "data" / "secrets"


class Positive(msgspec.Struct, frozen=True):
    """A text holding one secret of a kind, and the secret itself."""

    kind: str
    text: str
    secret: str
    why: str = ""


class Lookalike(msgspec.Struct, frozen=True):
    """A text that looks like a secret and is not one."""

    text: str
    why: str


POSITIVES = msgspec.json.decode((DATA / "positives.json").read_bytes(), type=list[Positive])
LOOKALIKES = msgspec.json.decode((DATA / "lookalikes.json").read_bytes(), type=list[Lookalike])
