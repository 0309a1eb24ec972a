"""The README and docs/ point only at what exists, inside the repository.

Every relative Markdown link (and its `#anchor`) and every backticked repository path such as
`worker/ingest/hook.py` in README.md and docs/**/*.md must exist; no link may leave the
repository (`../shared/…`, an absolute or `file:` path); the README stays short.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200

# Agent pages other developers are writing (docs/agents/ is theirs): the README links to them
# already. A link to one of these is tolerated only while the page does not exist yet; once
# it lands it is checked like any other, and then this set can shrink.
PENDING = frozenset(
    {
        "docs/agents/README.md",
        "docs/agents/codex.md",
        "docs/agents/gemini.md",
        "docs/agents/opencode.md",
        "docs/agents/install.md",
    }
)

# Example paths the docs use to explain a rule, not files of this repository.
EXAMPLE_PATHS = frozenset({"src/a.py"})

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
_CODE = re.compile(r"(`+)(.+?)\1", flags=re.DOTALL)
_PATH_WORD = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.@-]+)*/?$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", flags=re.MULTILINE)
_NOT_IN_REPO = (".git", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache")


def doc_files(repo: Path = REPO) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a block's content is code, not links)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N", "M"))
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_prose(text)):
        base = slug(heading)
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def _roots(repo: Path) -> set[str]:
    """Top-level entries of the repository: a backticked path starting with one is a claim."""
    return {p.name for p in repo.iterdir() if p.name not in _NOT_IN_REPO}


def _inside(path: Path, repo: Path) -> bool:
    try:
        path.resolve().relative_to(repo.resolve())
    except ValueError:
        return False
    return True


def link_problems(doc: Path, repo: Path = REPO) -> list[str]:
    """Every relative link of `doc` that leaves the repository or names nothing."""
    text = doc.read_text()
    prose = _prose(text)
    targets = _LINK.findall(prose) + _REF_DEF.findall(prose)
    problems = []
    for target in targets:
        where = f"{doc.relative_to(repo)}: link {target!r}"
        if not target:
            problems.append(f"{where} is empty")
            continue
        if _SCHEME.match(target):
            if not target.startswith(("https://", "http://", "mailto:")):
                problems.append(f"{where} is not a relative link inside the repository")
            continue
        path_part, _, fragment = target.partition("#")
        if path_part.startswith(("/", "~")):
            problems.append(f"{where} is an absolute path: link relative to the file")
            continue
        resolved = (doc.parent / path_part).resolve() if path_part else doc.resolve()
        if not _inside(resolved, repo):
            problems.append(f"{where} points outside the repository")
            continue
        relative = resolved.relative_to(repo.resolve()).as_posix()
        if not resolved.exists():
            if relative not in PENDING:
                problems.append(f"{where}: {relative} does not exist")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text()):
            problems.append(f"{where}: {relative} has no heading #{fragment}")
    return problems


def path_problems(doc: Path, repo: Path = REPO) -> list[str]:
    """Every backticked repository path (`worker/ingest/hook.py`, `deploy/k8s/`) not there."""
    roots = _roots(repo)
    problems = []
    for _, span in _CODE.findall(_prose(doc.read_text())):
        for word in span.split():
            word = word.strip(",;:()")
            if "/" not in word or not _PATH_WORD.match(word) or word in EXAMPLE_PATHS:
                continue
            first = word.split("/", 1)[0]
            if first not in roots and not word.endswith(".py"):
                continue  # `src/a.py`-like examples aside, only the repository's own paths
            if not (repo / word).exists():
                problems.append(f"{doc.relative_to(repo)}: `{word}` does not exist")
    return problems


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_links_stay_inside_the_repository_and_exist(doc: Path) -> None:
    assert link_problems(doc) == []


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_backticked_paths_exist(doc: Path) -> None:
    assert path_problems(doc) == []


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_nothing_points_at_files_outside_the_repository(doc: Path) -> None:
    # A user who clones memq has no ../shared/ (DESIGN, the captures) and no /work/… paths.
    text = doc.read_text()
    assert "../shared" not in text
    assert "shared/DESIGN" not in text
    assert "/work/" not in text


def _cli() -> dict[str, set[str]]:
    """Every `memq` command (`dlq replay` for a group's) and the options it takes."""
    import typer

    from worker.cli.app import app

    def walk(command: Any, name: str) -> dict[str, set[str]]:
        subcommands = getattr(command, "commands", None)
        if isinstance(subcommands, dict):  # a group (typer's own click has no Group base)
            found: dict[str, set[str]] = {}
            for sub_name, sub in subcommands.items():
                found |= walk(sub, f"{name} {sub_name}".strip())
            return found
        return {name: {o for p in command.params for o in p.opts if o.startswith("--")}}

    return walk(typer.main.get_command(app), "")


def test_the_cli_reference_names_every_command_and_only_real_options() -> None:
    commands = _cli()
    rows = re.findall(
        r"^\| (`memq .*?`(?: / `memq .*?`)*) \|", (REPO / "docs" / "cli.md").read_text(), re.M
    )
    documented: set[str] = set()
    problems = []
    for row in rows:
        for usage in re.findall(r"`memq ([^`]*)`", row):
            words = usage.replace("\\|", "|").split()
            name = words[0]
            if len(words) > 1 and f"{name} {words[1].split('|')[0]}" in commands:
                names = [f"{name} {sub}" for sub in words[1].split("|")]
            else:
                names = [name]
            for command in names:
                documented.add(command)
                if command not in commands:
                    problems.append(f"`memq {command}` is not a command")
                    continue
                unknown = set(re.findall(r"--[a-z][a-z-]*", usage)) - commands[command]
                problems += [f"`memq {command}` has no {o}" for o in sorted(unknown)]
    assert problems == []
    assert sorted(set(commands) - documented) == []


def test_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def test_every_docs_page_is_in_the_index() -> None:
    index = (REPO / "docs" / "README.md").read_text()
    pages = [p for p in (REPO / "docs").glob("*.md") if p.name != "README.md"]
    assert pages
    assert [p.name for p in pages if f"]({p.name})" not in index] == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "hook.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some `code` here\n")
    doc = tmp_path / "README.md"
    doc.write_text(
        "# t\n\n"
        "[fine](docs/a.md) [anchor](docs/a.md#some-code-here) [web](https://example.org)\n"
        "[gone](docs/missing.md) [bad anchor](docs/a.md#nowhere) [up](../shared/DESIGN.md)\n"
        "[abs](/etc/passwd) [file](file:///etc/passwd)\n"
        "`worker/hook.py` `worker/hooks.py` `bench/x.py --flag` `workr/typo.py` `src/a.py`\n"
        "```\n[in code](nowhere.md) `worker/in_code.py`\n```\n"
    )
    links = link_problems(doc, tmp_path)
    assert len(links) == 5, links
    assert any("docs/missing.md does not exist" in p for p in links)
    assert any("no heading #nowhere" in p for p in links)
    assert any("'../shared/DESIGN.md' points outside" in p for p in links)
    assert any("absolute path" in p for p in links)
    assert any("not a relative link" in p for p in links)
    paths = path_problems(doc, tmp_path)
    assert paths == [
        "README.md: `worker/hooks.py` does not exist",
        "README.md: `bench/x.py` does not exist",
        "README.md: `workr/typo.py` does not exist",
    ]
