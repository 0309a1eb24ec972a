"""Drive one session: take its lease, read batches in order, run turns until drained."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.outcomes import JobResult, Outcome
from pipeline.prompting.conversation import ObserverState
from pipeline.turns.decide import FailureKind, Undecodable, decide
from worker.errors import LeaseLostError
from worker.queue.leases import Lease, raise_fence_floor
from worker.queue.streams import Entry, SessionStream
from worker.sessions.delivered import Delivered, decode_entries
from worker.sessions.kept_replies import kept_prefix
from worker.sessions.runtime import Runtime
from worker.sessions.turn import TurnRunner
from worker.sessions.turn_reads import plan_entries, read_batch, until_due_s
from worker.storage.protocol import StoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

# A command cut off by a failover or a restart (the pool said so once); a job meets it anywhere.
REDIS_LOST = (RedisConnectionError, RedisTimeoutError)
_JOB_ERRORS = "job-errors"  # a field of the attempts hash, next to the per-turn counts
# A session waiting for an unreachable store looks again this often at least (a look costs a
# refused connection): the backlog restarts within seconds of the store's return.
STORE_RETRY_MAX_S = 5.0


async def observe(rt: Runtime, session: str, job_id: str) -> JobResult:
    """The body of the `observe_session` job: returns how it ended, for arq's log."""
    # The lease and the observer state in one round trip (the state is unused when busy).
    pipe = rt.redis.pipeline(transaction=False)
    Lease.queue_acquire(pipe, rt.keys, session, rt.lease_ttl_ms)
    rt.states.queue_load(pipe, session)
    try:
        token, raw_state = await pipe.execute()
    except REDIS_LOST as e:
        # A failover or restart cut the first round trip off: the entries stay pending and
        # the sweep schedules the session again (its job is gone), so one line, no traceback.
        logger.info("session job cut off before it began, Redis lost: %s", e)
        return JobResult.ERROR
    lease = Lease.taken(rt.redis, rt.keys, session, token, rt.lease_ttl_ms)
    if lease is None:
        # Another run still drives the session (a slow worker): look again after its lease.
        try:
            await rt.scheduler.release(session, job_id, defer_ms=rt.lease_ttl_ms, force=True)
        except REDIS_LOST as e:  # the sweep schedules it again, as below
            logger.info("session job could not hand the session on, Redis lost: %s", e)
            return JobResult.ERROR
        return JobResult.BUSY
    defer_s = 0.0
    result = JobResult.DRAINED
    waiting_after: str | None = None
    try:
        result, defer_s, waiting_after = await _drive(
            rt, session, lease, rt.states.decode(raw_state)
        )
    except LeaseLostError as e:
        logger.warning("stopped: %s", e)
        if e.stored_fence:  # storage refused: Redis may have lost its fence counter
            await raise_fence_floor(rt.redis, rt.keys, session, e.stored_fence)
        result = JobResult.FENCED
    except StoreUnavailableError as e:
        # The store warned once for the outage; its entries stay pending, no attempt counted.
        logger.debug("waiting for the store: %s", e)
        defer_s = min(await _error_backoff_s(rt, session), STORE_RETRY_MAX_S)
        result = JobResult.STORE_DOWN
        if rt.metrics is not None:
            rt.metrics.store_waits.inc()
    except Exception as e:
        # Storage down, a Redis blip, a bug: the entries stay pending for a later job. Without
        # a delay the hand-off below re-ran the job at once, hundreds of times a second.
        if isinstance(e, REDIS_LOST):  # a failover, a restart:
            logger.info("session job cut off, Redis lost: %s", e)  # said once by the pool
        else:
            logger.exception("session job failed: %s", e)
        defer_s = await _error_backoff_s(rt, session)
        result = JobResult.ERROR
        # A commit whose round trip failed after its ack left rows stored but unannounced,
        # with no pending entry to bring them back: announce them now if Redis allows.
        with contextlib.suppress(Exception):
            await rt.outbox.flush(session, late="session")
    finally:
        try:
            await _release(rt, session, job_id, lease, defer_s, waiting_after)
        except REDIS_LOST as e:
            # The lease expires by itself and the sweep schedules the session again.
            logger.info("session job could not hand the session on, Redis lost: %s", e)
            result = JobResult.ERROR
    return result


async def _release(
    rt: Runtime,
    session: str,
    job_id: str,
    lease: Lease,
    defer_s: float,
    waiting_after: str | None,
) -> None:
    """Give the lease back and hand the session on (or clear its job), in one round trip."""
    await lease.stop_renewing()
    pipe = rt.redis.pipeline(transaction=False)
    lease.queue_release(pipe)
    rt.scheduler.queue_release(
        pipe, session, job_id, defer_ms=int(defer_s * 1000), waiting_after=waiting_after
    )
    _lease_reply, handed_off = await pipe.execute(raise_on_error=False)
    # A failed lease release only leaves the lease to expire; a failed hand-off must surface.
    if isinstance(handed_off, Exception):
        raise handed_off


async def _error_backoff_s(rt: Runtime, session: str) -> float:
    """Growing delays for a session whose job keeps failing (reset by the next commit)."""
    s = rt.settings
    try:
        key = rt.keys.attempts(session)
        failures = int(await cast(Awaitable[int], rt.redis.hincrby(key, _JOB_ERRORS, 1)))
    except RedisError:
        return s.retry_max_s
    return s.retry_backoff.delay_s(failures)


async def _drive(
    rt: Runtime, session: str, lease: Lease, state: ObserverState | None
) -> tuple[JobResult, float, str | None]:
    """How the job stops: its result, the delay before the session's next job, and (when it
    waits for its turn to be due) the newest entry id it read."""
    s = rt.settings
    started = time.monotonic()
    # Start no new turn late in the job: a turn may need the observer twice (reminder).
    start_turns_until = started + s.job_timeout_s / 3
    deadline = started + s.job_timeout_s - 5
    stream = SessionStream(rt.redis, rt.keys, session, rt.consumer)
    runner = TurnRunner(rt, session, lease, stream, state)
    ended = False
    # Fairness: after turns_per_job observer turns the session goes to the back of the queue
    # (the release schedules its next job at now), so N busy sessions share C slots in turn.
    asked = 0
    # Entries left pending (by an earlier holder, or by this job breaking off mid-batch) are
    # claimed first; after a fully processed batch there are none, and XAUTOCLAIM is skipped.
    claim = True
    while time.monotonic() < start_turns_until and asked < s.turns_per_job:
        if rt.stopping.is_set():
            return JobResult.STOPPING, 0.0, None  # the release hands the rest to another worker
        lease.check()
        entries = await read_batch(stream, s.batch_max_events, s.batch_wait_ms, claim=claim)
        if not entries:
            break
        claim = True
        delivered, bad = decode_entries(session, entries)
        await _dead_letter(rt, lease, stream, bad)
        try:
            delivered = await _skip_processed(rt, session, lease, stream, delivered)
        except StoreUnavailableError:
            raise  # unreachable storage is waited for by the job's caller, not an attempt
        except StoreError as e:  # storage fails before the turn: an attempt all the same
            failed = await runner.failed(
                [d.entry for d in delivered], FailureKind.STORAGE, f"storage failed: {e}"
            )
            if failed.stop:
                return JobResult.stopped_by(failed.outcome), failed.defer_s, None
            continue
        if not delivered:
            continue
        # A turn whose commit failed is committed again as it was: its events alone, at once.
        first = delivered[0].entry
        kept = await runner.kept.load(first.id) if first.claimed else None
        if cut := kept_prefix(kept, [d.event.event_id for d in delivered]):
            delivered = delivered[:cut]
        # A full read is due (it may hold prompts besides its tool calls); otherwise too
        # little to be worth a call yet: the entries stay pending and the session comes back
        # when they are due (a publish that makes them due brings it forward).
        full = cut or len(entries) >= s.batch_max_events
        wait_s = 0.0 if full else until_due_s(delivered, s)
        if wait_s > 0:
            logger.debug("waiting for more tool calls", extra={"wait_s": round(wait_s, 3)})
            return JobResult.WAITING, wait_s, entries[-1].id
        turns = plan_entries(delivered, s)
        for i, (plan, turn_entries) in enumerate(turns):
            if rt.stopping.is_set():
                return JobResult.STOPPING, 0.0, None
            # The batch's last turn reads the next batch in its commit's round trip, when
            # the job will go on (entries read ahead and not used are claimed by a later job).
            goes_on = asked + 1 < s.turns_per_job and time.monotonic() < start_turns_until
            read_ahead = s.batch_max_events if i == len(turns) - 1 and goes_on else 0
            t0 = time.monotonic()
            result = await runner.run(plan, turn_entries, deadline, read_ahead=read_ahead,
                                      kept=kept if i == 0 else None)  # fmt: skip
            logger.info(
                "turn %s",
                result.label,
                extra={
                    "outcome": result.label,
                    "stored": result.stored,
                    "dedup": result.deduplicated,
                    "events": len(plan.events),
                    "ms": round((time.monotonic() - t0) * 1000, 1),
                },
            )
            if rt.metrics is not None:
                rt.metrics.finish_turn(result, len(plan.events))
            ended = ended or plan.ends
            if result.stop:
                return JobResult.stopped_by(result.outcome), result.defer_s, None
            asked += result.outcome != Outcome.RECORDED
            if result.outcome == Outcome.DEAD or asked >= s.turns_per_job:
                break  # DEAD: re-read, the turns after it were planned with the old conversation
        else:
            claim = bool(cut)  # the entries a kept turn left out are pending: claim them
    if ended and await stream.delete_if_drained(lease.token):
        logger.info("session ended and drained")
        return JobResult.ENDED, 0.0, None
    done = JobResult.YIELDED if asked >= s.turns_per_job else JobResult.DRAINED
    return done, 0.0, None


async def _dead_letter(
    rt: Runtime, lease: Lease, stream: SessionStream, bad: list[tuple[Entry, str]]
) -> None:
    """Move undecodable entries to the dead letters, counted and logged."""
    if not bad:
        return
    # No wait to spread: an undecodable entry is dead-lettered at once.
    decision = decide(Undecodable(entries=len(bad)), rt.settings.decision_policy,
                      now=datetime.now(UTC), jitter=0.0)  # fmt: skip
    await stream.dead_letter(lease.token, bad)
    await rt.counters.count(decision.result, decision.counted)
    for entry, reason in bad:
        logger.warning("dead-lettered %s: %s", entry.id, reason)


async def _skip_processed(
    rt: Runtime, session: str, lease: Lease, stream: SessionStream, delivered: list[Delivered]
) -> list[Delivered]:
    """The replay guard: ack the entries a crash left stored but unacked; return the rest."""
    # Only entries delivered before can have been stored: a crash between commit and ack.
    # New ones skip the storage round trip (publish already refused a repeated event id).
    claimed = [d.event.event_id for d in delivered if d.entry.claimed]
    done = await rt.store.processed_event_ids(session, claimed) if claimed else set()
    if not done:
        return delivered
    # Their rows may not have been announced either (the announce comes before the ack):
    # the session's outbox goes out first. Then ack; the observer never sees them again.
    await rt.outbox.flush(session, late="session")
    await stream.ack(lease.token, [d.entry.id for d in delivered if d.event.event_id in done])
    return [d for d in delivered if d.event.event_id not in done]
