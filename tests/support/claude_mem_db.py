"""Build a SQLite file with claude-mem's schema (the tables `memq import-claude-mem` reads)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

# The original's final schema for these four tables, as the reference describes it
# (compression-pipeline.md §6.1); indexes and unrelated tables are left out.
SCHEMA = (
    """CREATE TABLE sdk_sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        content_session_id TEXT NOT NULL,
        memory_session_id TEXT UNIQUE,
        project TEXT NOT NULL,
        platform_source TEXT NOT NULL DEFAULT 'claude',
        user_prompt TEXT,
        started_at TEXT NOT NULL,
        started_at_epoch INTEGER NOT NULL,
        completed_at TEXT,
        completed_at_epoch INTEGER,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed', 'failed')),
        worker_port INTEGER,
        prompt_counter INTEGER DEFAULT 0,
        custom_title TEXT
    )""",
    """CREATE TABLE observations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_session_id TEXT NOT NULL,
        project TEXT NOT NULL,
        text TEXT,
        type TEXT NOT NULL,
        title TEXT, subtitle TEXT, facts TEXT, narrative TEXT, concepts TEXT,
        files_read TEXT, files_modified TEXT,
        prompt_number INTEGER,
        discovery_tokens INTEGER DEFAULT 0,
        created_at TEXT NOT NULL,
        created_at_epoch INTEGER NOT NULL,
        content_hash TEXT,
        generated_by_model TEXT,
        relevance_count INTEGER DEFAULT 0,
        merged_into_project TEXT, agent_type TEXT, agent_id TEXT, metadata TEXT,
        synced_at INTEGER, origin_device_id TEXT, origin_local_id TEXT,
        sync_rev TEXT NOT NULL DEFAULT '1'
    )""",
    """CREATE TABLE session_summaries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_session_id TEXT NOT NULL,
        project TEXT NOT NULL,
        request TEXT, investigated TEXT, learned TEXT, completed TEXT, next_steps TEXT,
        files_read TEXT, files_edited TEXT, notes TEXT,
        prompt_number INTEGER,
        discovery_tokens INTEGER DEFAULT 0,
        created_at TEXT NOT NULL,
        created_at_epoch INTEGER NOT NULL,
        merged_into_project TEXT, synced_at INTEGER, origin_device_id TEXT,
        origin_local_id TEXT, sync_rev TEXT NOT NULL DEFAULT '1'
    )""",
    """CREATE TABLE user_prompts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_db_id INTEGER,
        content_session_id TEXT NOT NULL,
        prompt_number INTEGER NOT NULL,
        prompt_text TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_at_epoch INTEGER NOT NULL
    )""",
)


class ClaudeMemDb:
    """A claude-mem database file that tests fill row by row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        for statement in SCHEMA:
            self.conn.execute(statement)
        self.conn.commit()

    def session(self, content_id: str, memory_id: str | None, project: str, epoch_ms: int) -> None:
        self._insert(
            "sdk_sessions",
            content_session_id=content_id,
            memory_session_id=memory_id,
            project=project,
            started_at="2025-01-01T00:00:00.000Z",
            started_at_epoch=epoch_ms,
        )

    def observation(self, memory_id: str, project: str, epoch_ms: int, **fields: Any) -> int:
        row: dict[str, Any] = {
            "memory_session_id": memory_id,
            "project": project,
            "type": "discovery",
            "created_at": "2025-01-01T00:00:00.000Z",
            "created_at_epoch": epoch_ms,
            "content_hash": "0123456789abcdef",  # the original's hash, never reused
        }
        for key, value in fields.items():
            row[key] = json.dumps(value) if isinstance(value, list) else value
        return self._insert("observations", **row)

    def summary(self, memory_id: str, project: str, epoch_ms: int, **fields: Any) -> int:
        return self._insert(
            "session_summaries",
            memory_session_id=memory_id,
            project=project,
            created_at="2025-01-01T00:00:00.000Z",
            created_at_epoch=epoch_ms,
            **fields,
        )

    def prompt(self, content_id: str, number: int, text: str, epoch_ms: int) -> int:
        return self._insert(
            "user_prompts",
            content_session_id=content_id,
            prompt_number=number,
            prompt_text=text,
            created_at="2025-01-01T00:00:00.000Z",
            created_at_epoch=epoch_ms,
        )

    def execute(self, sql: str) -> None:
        self.conn.execute(sql)
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()

    def _insert(self, table: str, **row: Any) -> int:
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cursor = self.conn.execute(
            f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(row.values())
        )
        self.conn.commit()
        assert cursor.lastrowid is not None
        return cursor.lastrowid
