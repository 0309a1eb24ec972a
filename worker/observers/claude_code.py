"""The claude-code observer: each turn through the user's own Claude Code, by claude-agent-sdk.

One CLI process answers one session's turns (ClaudeSDKClient in streaming mode, its system
prompt fixed at start); between turns `/clear` empties its conversation, so every turn is
memq's system prompt plus this turn's message, as with the HTTP providers. Up to `warm` idle
processes are kept, least recently used first out; `warm=0` starts a process per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from pathlib import Path

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    ClaudeSDKError,
    CLIJSONDecodeError,
    CLINotFoundError,
    ProcessError,
    ResultMessage,
    TextBlock,
)

from worker.observers.claude_code_cli import isolated_options, observer_dir
from worker.observers.claude_code_replies import Turn, failed_turn
from worker.observers.errors import ObserverReplyTooLargeError, ObserverTransientError
from worker.observers.protocol import ObserverReply, ObserverRequest
from worker.observers.sdk import DEFAULT_MAX_REPLY_BYTES

PROVIDER = "claude-code"
_STDERR_LINES = 20
# The SDK's own limit on one stdout JSON line, set from the reply cap: JSON escaping can
# make text up to 6 bytes a byte (\uXXXX), and the message carries its metadata too.
_SDK_BUFFER_PER_REPLY_BYTE = 6
_SDK_BUFFER_SLACK = 64 * 1024
_BUFFER_OVERFLOW = "exceeded maximum buffer size"
logger = logging.getLogger(__name__)


class _Process:
    """One CLI process and the tail of what it wrote on stderr."""

    def __init__(self) -> None:
        self.stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self.client: ClaudeSDKClient | None = None
        self.clearing: asyncio.Task[None] | None = None  # the `/clear` after its last turn

    def stderr_tail(self) -> str:
        return " | ".join(line.strip() for line in self.stderr if line.strip())[-300:]


class ClaudeCodeObserver:
    """An Observer that runs the Claude Code CLI (bundled with claude-agent-sdk) per session."""

    def __init__(
        self,
        *,
        model: str,
        cli: str | None,
        data_dir: Path,
        max_tokens: int,
        timeout_s: float,
        warm: int,
        environ: Mapping[str, str] | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self._model = model
        self._max_reply_bytes = max_reply_bytes
        self._cli = cli
        self._data_dir = data_dir
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._warm = warm
        self._environ = dict(os.environ if environ is None else environ)
        self._idle: OrderedDict[str, _Process] = OrderedDict()  # by system prompt, oldest first
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def provider(self) -> str:
        """The provider id: "claude-code"."""
        return PROVIDER

    @property
    def model(self) -> str:
        """The model every call asks for."""
        return self._model

    async def complete(self, request: ObserverRequest) -> ObserverReply:
        """Send one turn; raises an ObserverError subclass on any failure."""
        started = time.perf_counter()
        process: _Process | None = None
        try:
            async with asyncio.timeout(self._timeout_s):
                process = await self._warm_process(request.system) or _Process()
                if process.client is None:
                    await self._connect(process, request.system)
                turn = await self._ask(process, request.user)
        except TimeoutError as e:
            self._discard(process)
            raise ObserverTransientError(
                f"{PROVIDER} observer: no reply within {self._timeout_s:g}s"
            ) from e
        except CLINotFoundError as e:
            raise ObserverTransientError(
                f"{PROVIDER} observer: Claude Code CLI not found ({e}): reinstall memq "
                "(claude-agent-sdk bundles it) or set MEMQ_CLAUDE_CODE_CLI"
            ) from e
        except (ClaudeSDKError, OSError) as e:
            tail = process.stderr_tail() if process else ""
            self._discard(process)
            if isinstance(e, CLIJSONDecodeError) and _BUFFER_OVERFLOW in str(e):
                raise self._too_large() from e  # one message past the SDK's own line cap
            raise ObserverTransientError(_crash_message(e, tail)) from e
        except BaseException:  # cancelled: the process may be mid-turn, never reuse it
            self._discard(process)
            raise
        latency_ms = (time.perf_counter() - started) * 1000
        if turn.error is not None:
            # A fresh process next time: one started before the user logged in (or whose
            # credentials expired) would go on failing.
            self._discard(process)
            raise failed_turn(turn)
        self._release(request.system, process)
        return ObserverReply(
            text=turn.text,
            usage=turn.usage,
            model=turn.model or self._model,
            provider=PROVIDER,
            latency_ms=latency_ms,
        )

    async def aclose(self) -> None:
        """Stop every warm CLI process."""
        idle, self._idle = list(self._idle.values()), OrderedDict()
        for process in idle:
            self._discard(process)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _warm_process(self, system: str) -> _Process | None:
        """The warm process for this system prompt, its last `/clear` done, if there is one."""
        process = self._idle.pop(system, None)
        if process is not None and process.clearing is not None:
            try:
                await process.clearing
            except (ClaudeSDKError, OSError):
                self._discard(process)
                return None
        return process

    async def _connect(self, process: _Process, system: str) -> None:
        """Start a CLI process for this system prompt."""
        options = isolated_options(
            system=system,
            model=self._model,
            cli=self._cli,
            cwd=observer_dir(self._data_dir),
            max_tokens=self._max_tokens,
            environ=self._environ,
            stderr=process.stderr.append,
            # Our own cap (on the reply's text) trips first; the SDK's cap on one JSON line
            # only stops a message that is mostly not text.
            max_buffer_size=_SDK_BUFFER_PER_REPLY_BYTE * self._max_reply_bytes + _SDK_BUFFER_SLACK,
        )
        process.client = ClaudeSDKClient(options)
        await process.client.connect()

    async def _ask(self, process: _Process, user: str) -> Turn:
        """Send the message and read up to the turn's result."""
        assert process.client is not None
        await process.client.query(user)
        texts: list[str] = []
        size = 0
        overflow: str | None = None
        turn = Turn()
        async for message in process.client.receive_response():
            if isinstance(message, AssistantMessage):
                blocks = [b.text for b in message.content if isinstance(b, TextBlock)]
                if message.error is not None:
                    turn.error = message.error
                    turn.error_text = " ".join(blocks)
                else:
                    turn.model = message.model
                    size += sum(len(b.encode()) for b in blocks)
                    if overflow is None:
                        texts.extend(blocks)
                    if overflow is None and size > self._max_reply_bytes:
                        # Keep the head only, and read on to the turn's result, so the SDK's
                        # stream ends as usual (breaking out leaves its pipes open).
                        overflow, texts = "\n".join(texts), []
            elif isinstance(message, ResultMessage):
                turn.read_result(message)
        if not turn.finished:  # the CLI went away mid-turn: never an empty (skipped) reply
            raise ClaudeSDKError("the CLI ended without the turn's result")
        if overflow is not None:
            raise self._too_large(overflow)
        turn.text = "\n".join(texts)
        return turn

    def _too_large(self, text: str = "") -> ObserverReplyTooLargeError:
        cap = self._max_reply_bytes
        head = text.encode()[:cap].decode("utf-8", "replace")
        return ObserverReplyTooLargeError(
            f"{PROVIDER} observer: reply over {cap} bytes (MEMQ_OBSERVER_MAX_REPLY_BYTES),"
            " not read further",
            head=head,
        )

    def _release(self, system: str, process: _Process) -> None:
        """Keep the process warm (clearing its conversation now) or stop it."""
        if self._warm == 0:
            self._discard(process)
            return
        process.clearing = asyncio.create_task(self._clear(process))
        self._idle[system] = process
        while len(self._idle) > self._warm:
            _, oldest = self._idle.popitem(last=False)
            self._discard(oldest)

    async def _clear(self, process: _Process) -> None:
        assert process.client is not None
        await process.client.query("/clear")
        async for _ in process.client.receive_response():
            pass

    def _discard(self, process: _Process | None) -> None:
        """Stop a process in the background (a cancelled caller cannot wait for it)."""
        if process is None or process.client is None:
            return
        task = asyncio.create_task(_stop(process))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


async def _stop(process: _Process) -> None:
    if process.clearing is not None:
        process.clearing.cancel()
        with contextlib.suppress(BaseException):
            await process.clearing
    assert process.client is not None
    try:
        await process.client.disconnect()
    except Exception as e:  # a process that is gone already
        logger.debug("claude-code observer: stopping the CLI: %s", e)


def _crash_message(error: BaseException, stderr: str) -> str:
    code = f" with exit code {error.exit_code}" if isinstance(error, ProcessError) else ""
    detail = " ".join(str(error).split())[:200]
    tail = f"; stderr: {stderr}" if stderr else ""
    return f"{PROVIDER} observer: the Claude Code CLI failed{code}: {detail}{tail}"
