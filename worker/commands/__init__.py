"""The `memq` subcommands, one module per command group; `worker.cli` assembles them."""
