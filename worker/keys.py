"""Every Redis key, channel and job id memq uses, built from the tenant prefix."""

from __future__ import annotations

CONSUMER_GROUP = "memq-workers"


class Keys:
    """Names under one prefix (one tenant): `Keys("memq").events("s1") == "memq:events:s1"`."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def events(self, session: str) -> str:
        """The per-session stream of published events."""
        return f"{self.prefix}:events:{session}"

    @property
    def sessions(self) -> str:
        """Set of session ids that have an events stream."""
        return f"{self.prefix}:sessions"

    def seen(self, event_id: str) -> str:
        """Idempotency marker of one published event id."""
        return f"{self.prefix}:seen:{event_id}"

    def scheduled(self, session: str) -> str:
        """Holds the job id of the one job scheduled or running for a session."""
        return f"{self.prefix}:scheduled:{session}"

    def lease(self, session: str) -> str:
        """The per-session lease (value: fencing token) of the job driving it."""
        return f"{self.prefix}:lease:{session}"

    def fence(self, session: str) -> str:
        """Counter that hands out increasing fencing tokens for a session."""
        return f"{self.prefix}:fence:{session}"

    def waiting(self, session: str) -> str:
        """Names a session's job while its turn is not yet due: only that job may be brought
        forward by a publish (never one deferred for a retry, a pause or a budget)."""
        return f"{self.prefix}:waiting:{session}"

    def job_sequence(self, session: str) -> str:
        """Counter that makes each scheduled job id of a session unique."""
        return f"{self.prefix}:jobseq:{session}"

    def observer(self, session: str) -> str:
        """The observer conversation state of a session."""
        return f"{self.prefix}:observer:{session}"

    def attempts(self, session: str) -> str:
        """Hash of failed attempts per turn (keyed by the turn's first entry id)."""
        return f"{self.prefix}:attempts:{session}"

    def kept(self, session: str) -> str:
        """Hash of settled turns whose commit failed (keyed by the turn's first entry id): the
        retry commits the reply already paid for instead of asking the observer again."""
        return f"{self.prefix}:kept:{session}"

    def pause(self, provider: str) -> str:
        """Fleet-wide quota pause of a provider (`anthropic` or `openai`), with a TTL."""
        return f"{self.prefix}:pause:{provider}"

    def short_pause(self, provider: str) -> str:
        """Fleet-wide short pause of a provider after a reply with retry-after, with a TTL.

        The key keeps its old name, `backoff:<provider>` (running workers of another version
        read it); the idea is a pause, like `pause:<provider>`, only short.
        """
        return f"{self.prefix}:backoff:{provider}"

    def rate_limit(self, provider: str, model: str) -> str:
        """Token buckets (requests and tokens per minute) of one provider and model."""
        return f"{self.prefix}:ratelimit:{provider}:{model}"

    def budget(self, day: str) -> str:
        """Hash of one UTC day's token use: `total` and `project:<name>` fields."""
        return f"{self.prefix}:budget:{day}"

    @property
    def feed(self) -> str:
        """Capped stream of stored observations and summaries."""
        return f"{self.prefix}:feed"

    @property
    def observations(self) -> str:
        """Pub/sub channel announcing each stored row."""
        return f"{self.prefix}:observations"

    def fanout_cursor(self, consumer: str) -> str:
        """The last feed id a named fan-out consumer delivered: where it resumes."""
        return f"{self.prefix}:fanout:{consumer}:cursor"

    def fanout_seen(self, consumer: str) -> str:
        """Sorted set of the `kind:id` rows a fan-out consumer delivered lately (dedupe)."""
        return f"{self.prefix}:fanout:{consumer}:seen"

    def fanout_stats(self, consumer: str) -> str:
        """Hash of a fan-out consumer's counters (delivered, duplicates, failed, …)."""
        return f"{self.prefix}:fanout:{consumer}:stats"

    @property
    def telegram_updates_offset(self) -> str:
        """The getUpdates offset of `memq telegram`: commands below it were answered."""
        return f"{self.prefix}:telegram:updates_offset"

    @property
    def dead(self) -> str:
        """Dead-letter stream."""
        return f"{self.prefix}:dead"

    @property
    def outcomes(self) -> str:
        """Hash of fleet-wide outcome counters."""
        return f"{self.prefix}:stats:outcomes"

    @property
    def tokens(self) -> str:
        """Hash of fleet-wide token counters (input, cached_input, output)."""
        return f"{self.prefix}:stats:tokens"

    @property
    def queue(self) -> str:
        """arq's queue name for this tenant."""
        return f"{self.prefix}:queue"

    def job_id_prefix(self, session: str) -> str:
        """Start of every arq job id of a session (arq's own keys are global, so prefixed)."""
        return f"{self.prefix}:observe:{session}:"

    def job_id(self, session: str, sequence: int) -> str:
        """arq job id of one scheduled run for a session."""
        return f"{self.job_id_prefix(session)}{sequence}"

    def session_of_job(self, job_id: str) -> str | None:
        """The session a job id of `job_id` names; None for any other job (the sweep's)."""
        start = f"{self.prefix}:observe:"
        # rpartition: a session id may itself hold colons.
        session, _, sequence = job_id.removeprefix(start).rpartition(":")
        return session if job_id.startswith(start) and session and sequence.isdigit() else None
