"""Pick the storage backend that MEMQ_DATABASE_URL names (SQLite in the data dir by default)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from worker.errors import ConfigError
from worker.settings import Settings
from worker.storage.protocol import Store
from worker.storage.sqlite.store import SqliteStore

DEFAULT_DATABASE_FILE = "memq.db"
_POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})


def open_store(settings: Settings) -> Store:
    """The Store the settings name; nothing is opened until its first call.

    With MEMQ_CHROMA=off it queues no rows for the vector index: nothing would index them.
    """
    url = settings.database_url
    # Every search through it is bounded: the CLI, the web UI and `memq mcp` all open it here.
    vector_queue, timeout_s = settings.chroma != "off", settings.search_timeout_s
    if not url:
        return SqliteStore(
            settings.data_path / DEFAULT_DATABASE_FILE, vector_queue=vector_queue,
            search_timeout_s=timeout_s,
        )  # fmt: skip
    if urlsplit(url).scheme.lower() in _POSTGRES_SCHEMES:
        # Imported here: asyncpg costs a CLI hook on SQLite ~0.1 s it never needs.
        from worker.storage.postgres.store import PostgresStore

        return PostgresStore(url, vector_queue=vector_queue, search_timeout_s=timeout_s)
    return SqliteStore(sqlite_path(url), vector_queue=vector_queue, search_timeout_s=timeout_s)


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///absolute/path` URL; ConfigError for any other URL."""
    # Never echo the URL itself: a postgresql:// URL may carry a password.
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme != "sqlite":
        raise ConfigError(
            f"MEMQ_DATABASE_URL scheme {scheme or '(none)'!r} is not supported:"
            " use sqlite:///absolute/path or postgresql://user:password@host:port/database"
        )
    # sqlite:////abs/path (SQLAlchemy's spelling) names the same file as sqlite:///abs/path.
    raw = unquote(parts.path)
    path = Path("/" + raw.lstrip("/"))
    if parts.netloc or not raw.startswith("/") or path == Path("/"):
        raise ConfigError(
            "MEMQ_DATABASE_URL must name an absolute file, as sqlite:///absolute/path"
        )
    return path
