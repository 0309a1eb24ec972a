"""Real coding agents (pinned npm binaries) driving a real memq stack."""
