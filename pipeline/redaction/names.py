"""Names that hold secrets: `DB_PASSWORD`, `apiKey`, `x-auth-token` do; `max_tokens` does not."""

from __future__ import annotations

import re

# The words a secret's name ends with, as the assignment scan spells them (longest first
# where one is a prefix of another, so an alternation built from them tries the long one).
SECRET_WORDS = ("passphrase", "password", "passwd", "pass", "pwd", "secret", "token")
KEY_QUALIFIERS = frozenset(
    {"api", "secret", "access", "private", "auth", "encryption", "signing", "master"}
    | {"client", "app", "session", "webhook", "service", "license", "admin", "subscription"}
)
"""The words before a final `key` that make it a secret (`apiKey`, not `primary_key`)."""

_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", re.ASCII)
_SECRET_LAST = frozenset(
    {"password", "passwd", "pwd", "pass", "passphrase", "secret", "token"}
    | {"apikey", "secretkey", "accesskey", "privatekey", "authkey"}
)


def is_secret_name(name: str) -> bool:
    """Whether a variable, key or header name says its value is a secret."""
    # The secret word must be the name's last part: `DB_PASSWORD`, `apiKey`, `x-auth-token`
    # are secrets; `PASSWORD_MIN_LENGTH`, `TOKEN_TYPE`, `max_tokens`, `primary_key` are not.
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if not parts:
        return False
    if parts[-1] in _SECRET_LAST:
        return True
    return parts[-1] == "key" and len(parts) > 1 and parts[-2] in KEY_QUALIFIERS
