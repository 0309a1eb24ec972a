"""SQLite's read-side listings: sessions, kept dropped replies, and row counts for stats."""

from __future__ import annotations

SELECT_SESSIONS = """
SELECT s.memory_session_id, s.project, s.started_at, s.last_activity_at, s.ended_at,
    (SELECT COUNT(*) FROM user_prompts p WHERE p.memory_session_id = s.memory_session_id),
    (SELECT COUNT(*) FROM observations o WHERE o.memory_session_id = s.memory_session_id),
    (SELECT COUNT(*) FROM summaries m WHERE m.memory_session_id = s.memory_session_id)
FROM sessions s {where}
ORDER BY s.last_activity_at DESC, s.memory_session_id DESC
LIMIT :limit
"""

SELECT_DROPPED = """
SELECT id, memory_session_id, project, category, raw, event_ids, created_at, reason, turn_kind,
    replayed_at
FROM dropped_outputs {where}
ORDER BY created_at DESC, id DESC
LIMIT :limit
"""

SELECT_COUNTS = """
SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM observations),
    (SELECT COUNT(*) FROM summaries), (SELECT COUNT(*) FROM user_prompts),
    (SELECT COUNT(*) FROM dropped_outputs),
    (SELECT COALESCE(SUM(input_tokens), 0) FROM token_usage),
    (SELECT COALESCE(SUM(cached_input_tokens), 0) FROM token_usage),
    (SELECT COALESCE(SUM(output_tokens), 0) FROM token_usage)
"""
