"""memq's I/O shell: Redis streams, arq jobs, observers, storage, fan-out and the CLI."""
