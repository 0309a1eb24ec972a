"""Bounds on one observer call, through the real SDKs and the loopback fake: the timeout is the
whole call's (a reply that drips), the read stops at a byte cap, and the API key never shows."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio

from tests.support.fake_observer import FakeObserver, Reply
from worker.observers import (
    AnthropicObserver,
    Observer,
    ObserverRequest,
    ObserverTransientError,
    OpenAIObserver,
)
from worker.observers.errors import ObserverError, ObserverReplyTooLargeError

REQUEST = ObserverRequest(system="observe", history=[], user="one tool call")
KEY = "sk-live-5f3c9a1e7b2d4c6f8a0e1b3d5f7a9c2e"
MakeObserver = Callable[..., Observer]
MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="fake", scope="module")
def _fix_fake() -> Iterator[FakeObserver]:
    fake = FakeObserver()
    yield fake
    fake.close()


@pytest_asyncio.fixture(name="make", loop_scope="module", params=["anthropic", "openai"])
async def _fix_make(
    request: pytest.FixtureRequest, fake: FakeObserver
) -> AsyncIterator[MakeObserver]:
    fake.reset()
    made: list[Observer] = []
    cls, base = (
        (AnthropicObserver, fake.url) if request.param == "anthropic"
        else (OpenAIObserver, fake.openai_url)
    )  # fmt: skip

    def make(*, timeout_s: float = 5.0, max_reply_bytes: int = 1024 * 1024) -> Observer:
        observer = cls(api_key=KEY, base_url=base, model="m", max_tokens=100, temperature=0.2,
                       timeout_s=timeout_s, max_reply_bytes=max_reply_bytes)  # fmt: skip
        made.append(observer)
        return observer

    yield make
    for observer in made:
        await observer.aclose()


@MODULE_LOOP
async def test_a_dripping_reply_is_cut_off_at_the_timeout_of_the_whole_call(
    fake: FakeObserver, make: MakeObserver
) -> None:
    # Headers at once, then a byte every 0.2 s: no gap between bytes reaches the timeout.
    fake.script(Reply(text="<observation>slow</observation>", drip_s=0.2), Reply(text="ok"))
    observer = make(timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ObserverTransientError, match=r"no reply within 1s"):
        await observer.complete(REQUEST)
    assert time.monotonic() - started < 2.0
    # The next call is not held by the one that dripped.
    assert (await observer.complete(REQUEST)).text == "ok"


@MODULE_LOOP
async def test_a_reply_past_the_byte_cap_is_not_read_further(
    fake: FakeObserver, make: MakeObserver
) -> None:
    huge = "<observation><narrative>" + "x" * 3_000_000 + "</narrative></observation>"
    fake.script(Reply(text=huge), Reply(text="ok"))
    observer = make(max_reply_bytes=64 * 1024)
    with pytest.raises(ObserverReplyTooLargeError, match=r"reply over 65536 bytes") as caught:
        await observer.complete(REQUEST)
    assert 0 < len(caught.value.head) <= 64 * 1024
    # Under the cap all is as before.
    assert (await observer.complete(REQUEST)).text == "ok"


@MODULE_LOOP
@pytest.mark.parametrize("status", [400, 401, 429, 500])
async def test_an_error_that_echoes_the_key_never_shows_it(
    fake: FakeObserver, make: MakeObserver, status: int
) -> None:
    fake.script(Reply(status=status, error_message="rejected", echo_credentials=True))
    with pytest.raises(ObserverError) as caught:
        await make().complete(REQUEST)
    message = str(caught.value)
    assert "rejected; request headers:" in message
    assert KEY not in message
    assert "***" in message
    assert caught.value.__cause__ is None  # the SDK's error (which holds the key) is not chained
    assert KEY in fake.requests[-1].headers.get("x-api-key", "") + fake.requests[-1].headers.get(
        "authorization", ""
    )
