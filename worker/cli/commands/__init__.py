"""One module per `memq` command group, each with register(app)."""
