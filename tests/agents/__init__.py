"""Real agent binaries (scripts/agents.sh) against a real memq, end to end."""
