"""A turn's bookkeeping: planning, when it is due, settling a reply into rows, evidence, hashes."""
