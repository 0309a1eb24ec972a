"""MEMQ_REDIS_URL as memq shows it: never a password, whatever the URL's form."""

from __future__ import annotations

# A query parameter whose name holds one of these is masked.
_CREDENTIAL_WORDS = ("pass", "pwd", "secret", "token", "auth", "key", "cred")


def describe_url(url: str) -> str:
    """The URL for messages: its password and credential-looking query values as `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>"
    # The last "@" ends the user info even when an unescaped password holds "/", "?" or "#".
    head, at, rest = rest.rpartition("@")
    user, colon, _ = head.partition(":")
    if any(c in user for c in "/?#"):  # not a user name: an "@" further on; show nothing of it
        userinfo = "***@"
    else:
        userinfo = f"{user}:***@" if colon else f"{user}{at}"
    rest, hash_sep, fragment = rest.partition("#")
    location, query_sep, query = rest.partition("?")
    fields = []
    for field in query.split("&") if query_sep else ():
        name, eq, _ = field.partition("=")
        secret = eq and any(w in name.lower() for w in _CREDENTIAL_WORDS)
        fields.append(f"{name}=***" if secret else field)
    tail = f"?{'&'.join(fields)}" if query_sep else ""
    return f"{scheme}://{userinfo}{location}{tail}{hash_sep}{'***' if fragment else ''}"
