"""The SQLite backend (aiosqlite), the default single-machine store."""
