"""Secret redaction and <private> stripping: pure text rules, run on the agent host."""
