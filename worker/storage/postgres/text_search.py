"""PostgreSQL's full-text search: the FTS5 match expression as a tsquery over tsvector columns."""

from __future__ import annotations

import re

from worker.storage.index_records import TABLE_OF, RowKind, TextFilter
from worker.storage.sql.conn import Query
from worker.storage.sql.indexing import search_kinds

# NULL for an empty list, which concat_ws skips.
_WORDS = "(SELECT string_agg(w, ' ') FROM jsonb_array_elements_text(t.{col}) AS w)"
_DOCUMENT = {
    "observation": "concat_ws(' … ', t.title, t.subtitle, t.narrative, "
    + f"{_WORDS.format(col='facts')}, {_WORDS.format(col='concepts')})",
    "summary": "concat_ws(' … ', t.request, t.investigated, t.learned, t.completed,"
    " t.next_steps, t.notes)",
}
_HEADLINE = "StartSel=[, StopSel=], MaxWords=14, MinWords=5, ShortWord=0, MaxFragments=1"

# One term of the FTS5 expression worker/search/hybrid.py builds: "word", "a phrase", "prefix"*.
_FTS5_TERM = re.compile(r'"([^"]*)"(\*?)')


def tsquery_text(match: str) -> str:
    """The to_tsquery text of an FTS5 match expression: every term must match.

    Each quoted term stays one quoted tsquery operand, which to_tsquery turns into a phrase
    of its words (stemmed by the same configuration as the rows); `*` keeps a prefix match.
    """
    operands = []
    for m in _FTS5_TERM.finditer(match):
        text, prefix = m.group(1), m.group(2)
        if not text.strip():
            continue
        quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
        operands.append(quoted + (":*" if prefix else ""))
    return " & ".join(operands)


def _text_arm(kind: RowKind) -> str:
    # $1 tsquery text, $2 limit, $3 project, $4 since_ms, $5 observation type.
    where = [
        "t.search @@ q.q",
        "($3::text IS NULL OR t.project = $3)",
        "($4::bigint IS NULL OR t.created_at_epoch_ms >= $4)",
    ]
    # Summaries match only the type `summary`.
    where.append(
        "($5::text IS NULL OR t.type = $5)"
        if kind == "observation"
        else "($5::text IS NULL OR $5 = 'summary')"
    )
    # Rank inverted so that, as with SQLite's bm25, lower is better.
    return (
        f"SELECT * FROM (SELECT '{kind}'::text AS kind, t.id, -ts_rank(t.search, q.q, 1) AS rank,"
        f" {_DOCUMENT[kind]} AS doc FROM {TABLE_OF[kind]} t, q WHERE {' AND '.join(where)}"
        " ORDER BY rank, t.id LIMIT $2) AS arm"
    )


def text_search(match: str, filters: TextFilter, limit: int) -> Query | None:
    """The tsvector query of `match` with these filters (kind, id, rank, snippet); None when
    the expression has no term."""
    query = tsquery_text(match)
    if not query:
        return None
    arms = " UNION ALL ".join(_text_arm(kind) for kind in search_kinds(filters))
    sql = (
        "WITH q AS (SELECT to_tsquery('memq_text', $1) AS q)"
        " SELECT hit.kind, hit.id, hit.rank,"
        f" ts_headline('memq_text', hit.doc, q.q, '{_HEADLINE}') AS snippet"
        f" FROM ({arms}) AS hit, q ORDER BY hit.rank, hit.kind, hit.id LIMIT $2"
    )
    return sql, (query, limit, filters.project, filters.since_ms, filters.type)
