"""Chroma as a derived index: the client MEMQ_CHROMA names, one collection, rows as documents."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import urlsplit

import msgspec

from worker.errors import ConfigError
from worker.settings import Settings
from worker.storage.index_records import RowKind, TextFilter
from worker.storage.records import StoredRow

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Documents, Embeddable, EmbeddingFunction

MetadataValue = str | int | float | bool
SUMMARY_FIELDS = ("request", "investigated", "learned", "completed", "next_steps", "notes")
_NAME_JUNK = re.compile(r"[^A-Za-z0-9._-]+")


class ChromaTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Where the vector index lives: a directory (embedded) or a Chroma server."""

    kind: Literal["embedded", "http"]
    path: str | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False

    @property
    def url(self) -> str:
        """The server's base URL (empty for the embedded index)."""
        if self.kind == "embedded":
            return ""
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{'https' if self.ssl else 'http'}://{host}:{self.port}"

    def describe(self) -> str:
        """For messages: the directory or the server URL."""
        if self.kind == "embedded":
            return f"embedded Chroma in {self.path}"
        return f"Chroma server {self.url}"


class VectorDocument(msgspec.Struct, frozen=True, kw_only=True):
    """One Chroma document: a deterministic id, the text to embed, flat metadata."""

    id: str
    text: str
    metadata: dict[str, MetadataValue]


class VectorMatch(msgspec.Struct, frozen=True, kw_only=True):
    """A nearest document, mapped back to its stored row."""

    kind: RowKind
    id: int
    distance: float
    text: str


def chroma_target(settings: Settings) -> ChromaTarget | None:
    """The index MEMQ_CHROMA names: None for `off`."""
    value = settings.chroma.strip()
    if value == "off":
        return None
    if value == "on":
        return ChromaTarget(kind="embedded", path=str(settings.data_path / "chroma"))
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigError(f"MEMQ_CHROMA={value!r}: use on, off or http://host:port")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8000)
    except ValueError as e:
        raise ConfigError(f"MEMQ_CHROMA={value!r}: the port is not a number") from e
    return ChromaTarget(kind="http", host=parts.hostname, port=port, ssl=parts.scheme == "https")


def collection_name(prefix: str, embedding_name: str) -> str:
    """One collection per tenant and embedding model (a new model needs a new index)."""
    name = _NAME_JUNK.sub("-", f"memq-{prefix}-{embedding_name}").strip("._-")
    return name[:500]


def documents_for(row: StoredRow) -> list[VectorDocument]:
    """A row's documents: title+subtitle, narrative, each fact, its files; a summary's fields."""
    base: dict[str, MetadataValue] = {
        "sqlite_id": row.id,
        "memory_session_id": row.memory_session_id,
        "project": row.project,
        "created_at_epoch": _epoch_ms(row.created_at),
    }
    if row.kind == "summary":
        base["doc_type"] = "session_summary"
        fields = [(f, getattr(row, f)) for f in SUMMARY_FIELDS]
        return [
            _doc(f"summary_{row.id}_{f}", text, base, field_type=f)
            for f, text in fields
            if text and text.strip()
        ]
    base.update(doc_type="observation", type=row.type or "discovery", title=row.title or "")
    docs = []
    heading = " — ".join(t for t in (row.title, row.subtitle) if t and t.strip())
    if heading:
        docs.append(_doc(f"obs_{row.id}_title", heading, base, field_type="title"))
    if row.narrative and row.narrative.strip():
        docs.append(_doc(f"obs_{row.id}_narrative", row.narrative, base, field_type="narrative"))
    for i, fact in enumerate(row.facts or []):
        if fact.strip():
            docs.append(_doc(f"obs_{row.id}_fact_{i}", fact, base, field_type="fact", fact_index=i))
    # Paths are in no other document (nor in FTS): "what changed in x/y.py" needs one of its own.
    files = dict.fromkeys(f for f in (*(row.files_modified or []), *(row.files_read or [])) if f)
    if files:
        docs.append(_doc(f"obs_{row.id}_files", "\n".join(files), base, field_type="files"))
    return docs


def _doc(
    doc_id: str, text: str, base: dict[str, MetadataValue], **extra: MetadataValue
) -> VectorDocument:
    return VectorDocument(id=doc_id, text=text, metadata={**base, **extra})


def _epoch_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def chroma_where(filters: TextFilter) -> dict[str, Any] | None:
    """The Chroma metadata filter for a search's project, type and since."""
    clauses: list[dict[str, Any]] = []
    if filters.project is not None:
        clauses.append({"project": filters.project})
    if filters.type == "summary":
        clauses.append({"doc_type": "session_summary"})
    elif filters.type is not None:
        clauses.append({"type": filters.type})
    if filters.since_ms is not None:
        clauses.append({"created_at_epoch": {"$gte": filters.since_ms}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class VectorIndex:
    """One Chroma collection. Synchronous (Chroma's client is): call it via asyncio.to_thread."""

    def __init__(self, client: ClientAPI, collection: Collection, target: ChromaTarget) -> None:
        self.client = client
        self.collection = collection
        self.target = target
        self._max_batch = max(1, min(client.get_max_batch_size(), 1000))

    @classmethod
    def open(
        cls, target: ChromaTarget, prefix: str, embedding: EmbeddingFunction[Documents]
    ) -> VectorIndex:
        """Connect (or open the directory) and get or create the tenant's collection."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        from worker.search.embeddings import offline_guards

        offline_guards()
        client: ClientAPI
        if target.kind == "embedded":
            assert target.path is not None
            Path(target.path).mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(
                path=target.path, settings=ChromaSettings(anonymized_telemetry=False)
            )
        else:
            from worker.search.chroma_http import bound_timeouts, check_heartbeat

            check_heartbeat(target.url)
            client = chromadb.HttpClient(
                host=target.host or "localhost",
                port=target.port or 8000,
                ssl=target.ssl,
                settings=ChromaSettings(anonymized_telemetry=False),
            )
            bound_timeouts(client)
        collection = client.get_or_create_collection(
            collection_name(prefix, embedding.name()),
            embedding_function=cast("EmbeddingFunction[Embeddable]", embedding),
            configuration={"hnsw": {"space": "cosine"}},
        )
        return cls(client, collection, target)

    def upsert(self, docs: Sequence[VectorDocument]) -> None:
        """Insert or replace documents by id (idempotent: the same id never duplicates)."""
        for start in range(0, len(docs), self._max_batch):
            chunk = docs[start : start + self._max_batch]
            self.collection.upsert(
                ids=[d.id for d in chunk],
                documents=[d.text for d in chunk],
                metadatas=[d.metadata for d in chunk],
            )

    def query(self, text: str, n: int, filters: TextFilter) -> list[VectorMatch]:
        """The `n` nearest documents to `text` (closest first), within the filters."""
        found = self.collection.query(
            query_texts=[text],
            n_results=n,
            where=chroma_where(filters),
            include=["metadatas", "documents", "distances"],
        )
        metadatas = (found.get("metadatas") or [[]])[0]
        distances = (found.get("distances") or [[]])[0]
        texts = (found.get("documents") or [[]])[0]
        matches = []
        for meta, distance, doc in zip(metadatas, distances, texts, strict=True):
            kind: RowKind = (
                "summary" if meta.get("doc_type") == "session_summary" else "observation"
            )
            matches.append(
                VectorMatch(
                    kind=kind, id=int(str(meta["sqlite_id"])), distance=distance, text=doc or ""
                )
            )
        return matches

    def heartbeat(self) -> None:
        """Raise unless the index answers (a Chroma server's heartbeat; the directory's)."""
        self.client.heartbeat()

    def count(self) -> int:
        """Documents in the collection."""
        return self.collection.count()
