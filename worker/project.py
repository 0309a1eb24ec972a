"""Project identity at the producer: MEMQ_PROJECT, else the main git repository of the cwd.

Git's own files are read (`.git` directory, or a `.git` file's `gitdir:` and its
`commondir`), never `git` itself, so the hook stays fast. A linked worktree maps to its main
repository, so every worktree of one repository files under one project.
"""

from __future__ import annotations

import os
from pathlib import Path

UNKNOWN_PROJECT = "unknown"


def resolve_project(cwd: str | os.PathLike[str], override: str | None = None) -> str:
    """The project name: `override` when set, else the main repository's (or cwd's) basename."""
    if override:
        return override
    path = Path(os.path.abspath(cwd)) if str(cwd) else Path.cwd()
    root = main_repository(path)
    name = (root or path).name
    if root is not None and name.endswith(".git") and len(name) > 4:
        name = name[: -len(".git")]  # a bare repository, e.g. `memq.git`
    return name or UNKNOWN_PROJECT


def main_repository(path: Path) -> Path | None:
    """The main repository directory holding `path`, or None outside any git repository."""
    for directory in (path, *path.parents):
        dot_git = directory / ".git"
        try:
            if dot_git.is_dir():
                return directory
            if dot_git.is_file():
                return _repository_of_git_file(directory, dot_git)
        except OSError:
            return None
    return None


def _repository_of_git_file(directory: Path, dot_git: Path) -> Path:
    # A worktree's `.git` file says `gitdir: <main>/.git/worktrees/<name>`, and that directory's
    # `commondir` points back at `<main>/.git`. A submodule's gitdir has no commondir: the
    # submodule is its own project.
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return directory
    gitdir = directory / text.removeprefix("gitdir:").strip()
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return directory
    common_dir = Path(os.path.normpath(gitdir / common))
    return common_dir.parent if common_dir.name == ".git" else common_dir


def checkout_root(path: Path) -> Path | None:
    """The top-level directory of the git checkout holding `path` (a worktree's own), or None."""
    for directory in (path, *path.parents):
        try:
            if (directory / ".git").exists():
                return directory
        except OSError:
            return None
    return None
