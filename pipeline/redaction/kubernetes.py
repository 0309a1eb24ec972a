"""Kubernetes Secret manifests: every value under `data:` / `stringData:` is a secret.

Only a text that declares `kind: Secret` (YAML or JSON) is searched; its `data` blocks
lose their values, whatever the keys are named (`tls.key`, `config.json`, `username`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.redaction.finders import SecretPattern, Span, in_patches, pattern
from pipeline.redaction.placeholders import is_placeholder

_KIND = re.compile(r"[\"']?kind[\"']?[ \t]*:[ \t]*[\"']?Secret(?!\w)")
_YAML_BLOCK = re.compile(r"^(?P<indent>[ \t]*)(?:data|stringData):[ \t]*\r?$", re.M)
_YAML_MEMBER = re.compile(
    r"(?:[^\s:#\"'][^:\n]{0,252}|\"[^\"\n]*\"|'[^'\n]*'):(?:[ \t]+(?P<value>.*))?$"
)
_BLOCK_SCALARS = frozenset({"|", ">", "|-", ">-", "|+", ">+"})
_JSON_BLOCK = re.compile(r"\"(?:data|stringData)\"[ \t]*:[ \t]*\{(?P<members>[^{}]{0,1000000})\}")
_JSON_VALUE = re.compile(r"\"[^\"\n]{1,253}\"\s{0,20}:\s{0,20}\"(?P<value>[^\"\n]+)\"")


def _secret_data(text: str) -> Iterator[Span]:
    if _KIND.search(text) is None:
        return
    spans = [*_yaml_values(text), *_json_values(text)]
    # A marker is a placeholder too, so a second pass finds nothing left to redact.
    yield from sorted(s for s in spans if not is_placeholder(text[s[0] : s[1]], bare=False))


def _yaml_values(text: str) -> Iterator[Span]:
    for block in _YAML_BLOCK.finditer(text):
        outer = len(block.group("indent"))
        pos = block.end() + 1
        while pos < len(text):
            eol = text.find("\n", pos)
            eol = len(text) if eol < 0 else eol
            line = text[pos:eol]
            content = line.lstrip(" \t")
            if not content.strip() or len(line) - len(content) <= outer:
                break  # a blank line or the block's end
            at = pos + len(line) - len(content)
            member = _YAML_MEMBER.match(content)
            if member is not None:  # `key: value`; a line without one continues a value
                value = member.group("value") or ""
                at += member.start("value") if member.group("value") is not None else 0
            else:
                value = content
            value = value.rstrip()
            if value and value not in _BLOCK_SCALARS:
                yield at, at + len(value)
            pos = eol + 1


def _json_values(text: str) -> Iterator[Span]:
    for block in _JSON_BLOCK.finditer(text):
        for member in _JSON_VALUE.finditer(text, block.start("members"), block.end("members")):
            yield member.span("value")


KUBERNETES_PATTERN: SecretPattern = pattern(
    "kubernetes-secret",
    in_patches(_secret_data),
    r"kind[\"']?[ \t]*:[ \t]*[\"']?secret",
)
"""The values of a Kubernetes Secret's `data` and `stringData`."""
