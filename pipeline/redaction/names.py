"""Names that hold secrets: `DB_PASSWORD`, `apiKey`, `PGPASSWORD` do; `max_tokens` does not."""

from __future__ import annotations

import re
from functools import lru_cache

# The words a secret's name ends with, as the assignment scan spells them (longest first
# where one is a prefix of another, so an alternation built from them tries the long one).
SECRET_WORDS = (
    "passphrase", "password", "passwd", "pass", "pwd", "secret", "token", "auth", "key-data",
)  # fmt: skip
KEY_QUALIFIERS = frozenset(
    {"api", "secret", "access", "private", "auth", "encryption", "signing", "master"}
    | {"client", "app", "session", "webhook", "service", "license", "admin", "subscription"}
)
"""Words before a final `key` that make it a secret in any name (`apiKey`, `secret_key`)."""

_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", re.ASCII)
# A name's last part that ends with one of these is a secret (`PGPASSWORD`, `authtoken`,
# `REDISCLI_AUTH`, `client_secret`, `DBPASS`), except a few words (`bypass`, `oauth`).
_SECRET_ENDINGS = ("pass", "password", "passwd", "passphrase", "pwd", "secret", "token", "auth")
_NOT_SECRET_LAST = frozenset(
    {"oldpwd", "oauth", "bypass", "compass", "surpass", "trespass", "overpass", "underpass"}
    | {"encompass", "multipass", "onepass"}
)
_ONE_WORD_KEYS = frozenset(
    {"apikey", "secretkey", "accesskey", "privatekey", "authkey", "masterkey", "licensekey"}
)
# A final `key` after one of these names a record, a map or a file, not a secret
# (`primary_key`, `cache_key`, `PUBLIC_KEY`, `SSH_KEY_PATH` ends in `path` anyway).
_NOT_SECRET_QUALIFIERS = frozenset(
    {"primary", "foreign", "sort", "partition", "cache", "idempotency", "public", "hash"}
    | {"range", "lookup", "object", "dict", "map", "group", "unique", "composite", "row"}
    | {"column", "shard", "routing", "dedup", "dedupe", "cursor", "page", "message", "i18n"}
    | {"translation", "label", "field", "index", "s3", "bucket", "file", "path", "name"}
    | {"type", "id", "hot", "short", "next", "prev", "last", "first", "start", "end", "sign"}
    | {"event", "metric", "tag", "state", "entry", "item", "record", "table", "lock", "dist"}
    | {"node", "react", "list", "json", "yaml", "config", "sorting", "grouping", "join", "a"}
    | {"b", "x", "y", "k", "this", "my", "the", "by", "of", "to", "from", "compound", "natural"}
)


@lru_cache(maxsize=4096)  # names repeat: every line of an env dump, every key of a list
def is_secret_name(name: str) -> bool:
    """Whether a variable, key or header name says its value is a secret."""
    # The secret word must end the name (trailing numbers aside): `DB_PASSWORD`, `apiKey`,
    # `API_KEY_2`, `x-auth-token` are secrets; `PASSWORD_MIN_LENGTH`, `TOKEN_TYPE`,
    # `max_tokens`, `primary_key` are not. `PWD` is the shell's working directory.
    if name == "PWD":
        return False
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    while parts and parts[-1].isdigit():
        parts.pop()
    if not parts:
        return False
    last = parts[-1]
    if last in _NOT_SECRET_LAST:
        return False
    if last.endswith(_SECRET_ENDINGS) or last in _ONE_WORD_KEYS:
        return True
    if len(parts) > 1 and parts[-2:] == ["key", "data"]:  # kubeconfig `client-key-data`
        return True
    if len(parts) > 1 and parts[-2] == "secret" and last in ("string", "binary"):
        return True  # Secrets Manager's `SecretString`, `SecretBinary`
    if last != "key" or len(parts) < 2:
        return False
    return parts[-2] in KEY_QUALIFIERS or parts[-2] not in _NOT_SECRET_QUALIFIERS
