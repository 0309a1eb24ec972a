"""Observing a session: the job, the session run, the turn, the conversation, announcing rows."""
