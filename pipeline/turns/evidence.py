"""File evidence: which files a batch of tool calls read or modified, taken from tool inputs."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

import msgspec

from pipeline.events import ToolCall
from pipeline.replies.textnorm import JS_WHITESPACE, js_trim


class FileEvidence(msgspec.Struct, frozen=True, kw_only=True):
    """Paths the tool calls themselves name as read or modified, in first-seen order."""

    read: list[str] = []
    modified: list[str] = []


_READ_TOOLS = frozenset({"Read"})
_WRITE_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit", "write_file"})
_PATCH_TOOLS = frozenset({"apply_patch"})
_FILE_FIELDS = ("file_path", "filePath", "notebook_path", "notebookPath")
_PATCH_HEADERS = ("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: ")
_OBJECT = msgspec.json.Decoder(dict[str, object])


def file_evidence(calls: Sequence[ToolCall]) -> FileEvidence:
    """Read and modified paths named by the inputs of `Read`, write and `apply_patch` calls.

    Other tools (`Glob`, `Grep`, `LS`, `Bash`, …) give nothing: no guessing from commands.
    """
    read: list[str] = []
    modified: list[str] = []
    for call in calls:
        fields = _input_object(call.tool_input)
        if call.tool_name in _READ_TOOLS and fields is not None:
            read += _field_paths(fields, with_path=False)
        elif call.tool_name in _WRITE_TOOLS and fields is not None:
            modified += _field_paths(fields, with_path=True)
            for edit in _list(fields.get("edits")):
                if isinstance(edit, dict):
                    modified += _field_paths(edit, with_path=True)
        elif call.tool_name in _PATCH_TOOLS:
            for patch in _patch_texts(call.tool_input):
                modified += patch_paths(patch)
    return FileEvidence(read=_dedupe(read), modified=_dedupe(modified))


def evidence_hashes(calls: Sequence[ToolCall]) -> dict[str, str | None]:
    """The batch's `file_hashes`, merged: a later call's hash of a path wins (content after it)."""
    merged: dict[str, str | None] = {}
    for call in calls:
        merged.update(call.file_hashes or {})
    return merged


def patch_paths(patch: str) -> list[str]:
    """Paths a patch touches: `*** Update/Add/Delete File:`, `*** Move to:` and diff `+++` lines.

    A `+++` line counts only right after a `---` line (a file header, not an added line
    that happens to start with `++`); its `b/` prefix and tab-separated timestamp go, and
    `/dev/null` (a deletion) is skipped.
    """
    paths: list[str] = []
    previous = ""
    for line in patch.split("\n"):
        header = next((h for h in _PATCH_HEADERS if line.startswith(h)), None)
        if header is not None:
            paths.append(js_trim(line[len(header) :]))
        elif line.startswith("+++ ") and previous.startswith("--- "):
            path = js_trim(line[4:].split("\t", 1)[0])
            path = path.removeprefix("b/")
            if path != "/dev/null":
                paths.append(path)
        previous = line
    return _dedupe(paths)


def mentioned_paths(calls: Sequence[ToolCall]) -> set[str]:
    """Every path-like string in the batch's tool inputs, normalised (see `normalise_path`).

    Strings under path-ish keys (names ending in `path`, `paths`, `file`, `files`,
    `filename`), paths in patches, and tokens of commands and raw string inputs that
    contain a `/` or end in a file extension.
    """
    found: set[str] = set()
    for call in calls:
        fields = _input_object(call.tool_input)
        if fields is not None:
            _collect(fields, found)
        elif isinstance(call.tool_input, str):
            _collect_text(call.tool_input, found)
    found.discard("")
    return found


def merge_model_files(
    model_paths: Sequence[str], evidence_paths: Sequence[str], batch_paths: Collection[str]
) -> list[str]:
    """Evidence paths, then the model's paths that the batch's tool calls mention.

    A model path no tool input mentions is dropped (no invented paths). Paths compare
    after `normalise_path`; the first spelling seen is kept; blanks are dropped.
    """
    allowed = {normalise_path(p) for p in batch_paths}
    merged: list[str] = []
    seen: set[str] = set()
    candidates = [(p, True) for p in evidence_paths] + [(p, False) for p in model_paths]
    for path, trusted in candidates:
        path = js_trim(path)
        key = normalise_path(path)
        if key and key not in seen and (trusted or key in allowed):
            seen.add(key)
            merged.append(path)
    return merged


class ObservationFiles(msgspec.Struct, frozen=True, kw_only=True):
    """One observation's `files_read`, `files_modified` and the `file_hashes` of those files."""

    read: list[str]
    modified: list[str]
    hashes: dict[str, str | None]


def observation_files(
    model_read: Sequence[str],
    model_modified: Sequence[str],
    evidence: FileEvidence,
    hashes: Mapping[str, str | None],
    batch_paths: Collection[str],
) -> ObservationFiles:
    """The turn's evidence files the observation's model paths name, with only their hashes;
    the whole turn's evidence and hashes when it names none (it may be about any call).

    Either way the model's own paths join by `merge_model_files`'s rule (no invented paths).
    """
    named = [*model_read, *model_modified]
    read = [p for p in evidence.read if _names_any(p, named)]
    modified = [p for p in evidence.modified if _names_any(p, named)]
    if not read and not modified:  # it names no evidence file: it may be about any call
        read, modified, kept = evidence.read, evidence.modified, dict(hashes)
    else:
        kept = {key: h for key, h in hashes.items() if _names_any(key, [*read, *modified])}
    return ObservationFiles(
        read=merge_model_files(model_read, read, batch_paths),
        modified=merge_model_files(model_modified, modified, batch_paths),
        hashes=kept,
    )


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: equal after `normalise_path`, or one ends with the other
    at a `/` (`src/a.py` and `/repo/src/a.py`; not `xa.py` and `a.py`)."""
    a, b = normalise_path(a), normalise_path(b)
    return bool(a and b) and (a == b or a.endswith("/" + b) or b.endswith("/" + a))


def _names_any(path: str, others: Iterable[str]) -> bool:
    return any(same_file(path, other) for other in others)


def normalise_path(path: str) -> str:
    """Trimmed, without leading `./` segments: `./src/a.py` and `src/a.py` are one path."""
    path = js_trim(path)
    while path.startswith("./"):
        path = path[2:].lstrip("/")
    return path


def _input_object(tool_input: object) -> dict[str, object] | None:
    if isinstance(tool_input, dict):
        return tool_input
    if isinstance(tool_input, str) and tool_input.lstrip(JS_WHITESPACE).startswith("{"):
        try:
            return _OBJECT.decode(tool_input)
        except msgspec.DecodeError:
            return None
    return None


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _field_paths(fields: dict[str, object], *, with_path: bool) -> Iterator[str]:
    names = (*_FILE_FIELDS, "path") if with_path else _FILE_FIELDS
    for name in names:
        yield from _strings([fields.get(name)])
    yield from _strings(_list(fields.get("filePaths")))


def _strings(values: Iterable[object]) -> Iterator[str]:
    for value in values:
        if isinstance(value, str) and (text := js_trim(value)):
            yield text


def _patch_texts(tool_input: object) -> Iterator[str]:
    fields = _input_object(tool_input)
    if fields is None:
        if isinstance(tool_input, str):
            yield tool_input  # raw patch text
        return
    yield from (v for v in (fields.get("patch"), fields.get("input")) if isinstance(v, str))
    for edit in _list(fields.get("edits")):
        if isinstance(edit, str):
            yield edit
        elif isinstance(edit, dict) and isinstance(patch := edit.get("patch"), str):
            yield patch


def _dedupe(paths: Iterable[str]) -> list[str]:
    return [p for p in dict.fromkeys(paths) if p]


_PATH_SUFFIXES = ("path", "paths", "file", "files", "filename")
_COMMAND_KEYS = frozenset({"command", "cmd", "patch", "input", "script"})
_TOKEN = re.compile(r"[^\s'\"`;|&<>(){}\[\],=]+")


def _is_path_key(key: str) -> bool:
    # `path`, `file_path`, `notebook-path`, `filePaths`, `target_file`; not `profile`.
    low = key.lower()
    return any(
        low == s or low.endswith(("_" + s, "-" + s)) or key.endswith(s[0].upper() + s[1:])
        for s in _PATH_SUFFIXES
    )


def _collect(value: object, found: set[str], key: str = "") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _collect(v, found, str(k))
    elif isinstance(value, list):
        for item in value:
            _collect(item, found, key)
    elif isinstance(value, str):
        if _is_path_key(key):
            found.add(normalise_path(value))
        if key in _COMMAND_KEYS:
            _collect_text(value, found)


def _collect_text(text: str, found: set[str]) -> None:
    # Commands and patches: every token shaped like a path. Over-inclusion is harmless:
    # this set only lets through paths that the model names itself.
    found.update(normalise_path(p) for p in patch_paths(text))
    for token in _TOKEN.findall(text):
        token = token.rstrip(":.")
        if token.startswith("-") or "://" in token:
            continue
        if "/" in token or _has_extension(token):
            found.add(normalise_path(token))


def _has_extension(token: str) -> bool:
    # `a.py`, `.env`, `Makefile.am`; not `1.2`, `v1.2.3` or `a.`.
    stem, dot, ext = token.rpartition(".")
    return (
        bool(dot)
        and ext.isascii()
        and ext.replace("_", "").isalnum()
        and any(c.isalpha() for c in ext)
        and not stem.endswith(".")
    )
