"""Pick the storage backend that MEMQ_DATABASE_URL names (SQLite in the data dir by default)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from worker.errors import ConfigError
from worker.settings import Settings
from worker.storage.protocol import Store
from worker.storage.sqlite import SqliteStore

DEFAULT_DATABASE_FILE = "memq.db"


def open_store(settings: Settings) -> Store:
    """The Store the settings name; nothing is opened until its first call."""
    url = settings.database_url
    if not url:
        return SqliteStore(settings.data_path / DEFAULT_DATABASE_FILE)
    return SqliteStore(sqlite_path(url))


def sqlite_path(url: str) -> Path:
    """The file of a `sqlite:///absolute/path` URL; ConfigError for any other URL."""
    # Never echo the URL itself: a postgresql:// URL may carry a password.
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in {"postgresql", "postgres"}:
        raise ConfigError(
            "PostgreSQL storage is not implemented yet: unset MEMQ_DATABASE_URL to use SQLite"
            " in the data dir, or set it to sqlite:///absolute/path"
        )
    if scheme != "sqlite":
        raise ConfigError(
            f"MEMQ_DATABASE_URL scheme {scheme or '(none)'!r} is not supported:"
            " use sqlite:///absolute/path"
        )
    # sqlite:////abs/path (SQLAlchemy's spelling) names the same file as sqlite:///abs/path.
    raw = unquote(parts.path)
    path = Path("/" + raw.lstrip("/"))
    if parts.netloc or not raw.startswith("/") or path == Path("/"):
        raise ConfigError(
            "MEMQ_DATABASE_URL must name an absolute file, as sqlite:///absolute/path"
        )
    return path
