"""The listings the CLI and UI page through, built from the filters given, for both backends.

Only the filters given are written into a statement: `$2 IS NULL OR …` would keep SQLite off
its indexes. $1 is always the limit.
"""

from __future__ import annotations

from worker.storage.sql.conn import Query
from worker.storage.sql.rows import RowSelects

_SESSIONS = """
SELECT s.memory_session_id, s.project, s.started_at, s.last_activity_at, s.ended_at,
    (SELECT COUNT(*) FROM user_prompts p WHERE p.memory_session_id = s.memory_session_id)
        AS prompts,
    (SELECT COUNT(*) FROM observations o WHERE o.memory_session_id = s.memory_session_id)
        AS observations,
    (SELECT COUNT(*) FROM summaries m WHERE m.memory_session_id = s.memory_session_id)
        AS summaries
FROM sessions s {where}
ORDER BY s.last_activity_at DESC, s.memory_session_id DESC
LIMIT $1
"""

# event_ids is JSON; both drivers hand it over as text (asyncpg's default for JSONB).
_DROPPED = """
SELECT id, memory_session_id, project, category, raw, event_ids, created_at, reason, turn_kind,
    replayed_at
FROM dropped_outputs {where}
ORDER BY created_at DESC, id DESC
LIMIT $1
"""


def observations_query(
    selects: RowSelects, memory_session_id: str | None, project: str | None, limit: int
) -> Query:
    """The newest StoredRows, of one session and/or project when given."""
    conditions: list[str] = []
    values: list[object] = [limit]
    for column, wanted in (("memory_session_id", memory_session_id), ("project", project)):
        if wanted is not None:
            values.append(wanted)
            conditions.append(f"{column} = ${len(values)}")
    return selects.merged(conditions, "$1", newest_first=True), values


def sessions_query(project: str | None, limit: int) -> Query:
    """The sessions listing (of one project when given), newest first."""
    if project is None:
        return _SESSIONS.format(where=""), (limit,)
    return _SESSIONS.format(where="WHERE s.project = $2"), (limit, project)


def dropped_query(limit: int, include_replayed: bool) -> Query:
    """The dropped-outputs listing, newest first; replayed ones only when asked for."""
    where = "" if include_replayed else "WHERE replayed_at IS NULL"
    return _DROPPED.format(where=where), (limit,)
