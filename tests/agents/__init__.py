"""Real agent binaries (scripts/agents.sh) against a real memq: their hooks and plugins end to end."""
