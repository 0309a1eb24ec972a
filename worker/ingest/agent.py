"""`memq agent`: the agents' HTTP hook endpoint; a long-lived process instead of one per call.

`POST /hooks/<agent>` (claude-code, …) takes the JSON a command hook reads on stdin and
answers what it would print (SessionStart: the project's context; otherwise an empty 200).
Events are prepared like the command hook's and handed to `AgentPublisher`, so the answer
never waits for Redis. Loopback only unless MEMQ_AGENT_TOKEN is set; bodies past
MEMQ_AGENT_MAX_BODY_BYTES get a 413; connections past MEMQ_AGENT_MAX_CONNECTIONS a 503, and
`/healthz` a 503 while the publisher is stuck (MEMQ_AGENT_STALL_S). `/metrics` counts where
the events went (`worker/ingest/agent_metrics.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from pipeline.errors import PipelineError
from worker.http_connections import capped_http_protocol, connection_cap, refusal_response
from worker.http_serving import (
    MIN_TOKEN_CHARS,
    STOP_GRACE_S,
    Listener,
    check_token_bind,
    is_loopback_host_header,
    serve_until_stopped,
)
from worker.ingest.agent_publisher import DRAIN_S, AgentPublisher
from worker.ingest.agents import AGENTS
from worker.ingest.agents.payload import HookPayloadError
from worker.ingest.hook_input import prepare_all, read_hook_input
from worker.ingest.relay import RELAY_QUERY, TARGET_HEADER, target
from worker.settings import Settings

logger = logging.getLogger(__name__)

HOOK_PATH = "/hooks/claude-code"
HOOKS_PREFIX = "/hooks/"
# SessionStart reads the store for the context: past this the session starts without it.
SESSION_START_BUDGET_S = 2.0
# Run on its own, a SIGTERM stops it within this even when a thread is stuck for good (a
# hung disk under the spool): uvicorn's grace, the publisher's drain, its spooling, 1 s.
STOP_DEADLINE_S = STOP_GRACE_S + 2 * DRAIN_S + 1


class _BodyTooLargeError(Exception):
    pass


def check_agent_bind(host: str, token: str | None) -> None:
    """ConfigError when the agent would listen beyond loopback without a long MEMQ_AGENT_TOKEN."""
    refusal = (
        f"refusing to take hook events on {host} without a MEMQ_AGENT_TOKEN of at least"
        f" {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 16`): set one, or bind"
        " 127.0.0.1"
    )
    check_token_bind(host, token, missing=refusal, too_short=refusal)


def build_agent_app(settings: Settings, publisher: AgentPublisher) -> Starlette:
    """The endpoint's Starlette app; the publisher's tasks run for the app's lifespan."""
    token = settings.agent_token.reveal().encode() if settings.agent_token else None
    expected = b"Bearer " + token if token else None
    own_target = target(os.environ)

    async def hook(request: Request) -> Response:
        agent = request.path_params["agent"]
        if agent not in AGENTS:
            return _line(404, f"no agent {agent!r}: hooks are taken for {', '.join(AGENTS)}")
        refusal = _refusal(request, expected)
        if refusal is not None:
            return refusal
        # A command hook's relay (worker/ingest/relay.py): answered once the events are in
        # the spool, and only for a hook of this memq (the same Redis, data dir, project).
        durable = request.url.query == RELAY_QUERY
        if durable and request.headers.get(TARGET_HEADER) != own_target:
            return _line(409, "this memq agent serves another memq's Redis or data dir")
        try:
            raw = await _read_body(request, settings.agent_max_body_bytes)
        except _BodyTooLargeError:
            return _line(
                413,
                f"hook input larger than MEMQ_AGENT_MAX_BODY_BYTES={settings.agent_max_body_bytes}",
            )
        except ClientDisconnect:
            return _line(400, "the client went away before sending the whole hook input")
        try:
            # In a thread: redacting a large input or hashing the files a call names (up to
            # 100 ms) would otherwise hold up every other request on the loop.
            hook_input = await asyncio.to_thread(
                read_hook_input, raw, settings, agent=agent, default_cwd=""
            )
        except (HookPayloadError, PipelineError) as e:
            logger.warning("hook input refused: %s", e)
            return _line(400, str(e))
        output = ""
        if hook_input.session_start:
            from worker.search.context import session_start_output

            # It runs its own event loop (the command hook has none): so, a thread.
            output = await asyncio.to_thread(
                session_start_output,
                settings,
                hook_input.project,
                SESSION_START_BUDGET_S,
                hook_input.cwd or None,
            )
        events = hook_input.events
        if hook_input.resend:  # all of them: the publish script keeps the first copy of each
            events = await asyncio.to_thread(prepare_all, hook_input.resend, settings) + events
        if events:
            late = await publisher.submit_within(events, settings.agent_stall_s, durable=durable)
            if late is not None:
                return _line(503, late)
        return Response(output, media_type="application/json")

    async def healthz(request: Request) -> Response:
        stall = publisher.stall()
        return PlainTextResponse("ok\n") if stall is None else _line(503, stall)

    async def metrics(request: Request) -> Response:
        # Counts only, no hook content: open like /healthz, for the host's scraper. In a
        # thread: the spool's size is read from disk, which may hang (MEMQ_AGENT_STALL_S).
        text = await asyncio.to_thread(publisher.metrics.render)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await publisher.start()
        try:
            yield
        finally:
            await publisher.aclose()

    return Starlette(
        routes=[
            Route(HOOKS_PREFIX + "{agent}", hook, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/metrics", metrics),
        ],
        lifespan=lifespan,
    )


def _refusal(request: Request, expected: bytes | None) -> Response | None:
    # Claude Code posts without an Origin; a browser always sends one with a POST, so a web
    # page cannot plant events here (a "simple" cross-site request needs no preflight).
    if "origin" in request.headers:
        return _line(403, "hook events are not taken from a browser (the request has an Origin)")
    if expected is None:
        # Without a token it listens on loopback only (check_agent_bind), and answers only
        # loopback Host names, so DNS rebinding cannot read a SessionStart context.
        if not is_loopback_host_header(request.headers.get("host", "")):
            return _line(421, "without MEMQ_AGENT_TOKEN this endpoint answers on localhost only")
        return None
    given = request.headers.get("authorization", "").encode()
    if not hmac.compare_digest(given, expected):
        return _line(401, "missing or wrong `Authorization: Bearer` token (MEMQ_AGENT_TOKEN)")
    return None


async def _read_body(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _BodyTooLargeError
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _BodyTooLargeError
        chunks.append(chunk)
    return b"".join(chunks)


def _line(status: int, message: str) -> Response:
    return PlainTextResponse(f"memq agent: {' '.join(message.split())}\n", status_code=status)


async def run_agent(settings: Settings, listener: Listener) -> None:
    """Serve hook requests until SIGINT/SIGTERM, or until the listener's `stop` is set."""
    check_agent_bind(listener.host, settings.agent_token.reveal() if settings.agent_token else None)
    cap = connection_cap(settings.agent_max_connections)
    refusal = refusal_response(
        f"memq agent: {cap} connections are open, the most it keeps"
        " (MEMQ_AGENT_MAX_CONNECTIONS, at most half the open-file limit): try again shortly"
    )
    http = capped_http_protocol(
        max_connections=cap, idle_timeout_s=settings.agent_idle_timeout_s, refusal=refusal
    )
    await serve_until_stopped(
        build_agent_app(settings, AgentPublisher(settings)), listener, logger=logger,
        announce="taking Claude Code hook events on %s", path=HOOK_PATH, backlog=1024,
        http=http, idle_timeout_s=settings.agent_idle_timeout_s,
        on_stop=_exit_if_still_running if listener.stop is None else None,
    )  # fmt: skip


def _exit_if_still_running() -> None:
    """On SIGTERM/SIGINT: a daemon timer ends the process at STOP_DEADLINE_S whatever waits."""
    timer = threading.Timer(STOP_DEADLINE_S, _exit_now)
    timer.daemon = True
    timer.start()


def _exit_now() -> None:
    logger.error(
        "still not stopped %g s after the signal (a thread stuck on a hung disk or mount):"
        " exiting without it",
        STOP_DEADLINE_S,
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(1)
