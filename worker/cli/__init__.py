"""The `memq` command line: the entry point, exit codes, one module per command group."""
