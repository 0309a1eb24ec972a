"""Finding memories: full-text and vector search, the vector sync, the SessionStart context."""
