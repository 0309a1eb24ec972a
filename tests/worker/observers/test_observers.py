"""The observer adapters: real SDK clients against the loopback fake, error mapping, factory."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio

from tests.support.fake_observer import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    FakeObserver,
    Reply,
)
from tests.support.ports import free_port
from worker.errors import ConfigError
from worker.observers import (
    AnthropicObserver,
    Exchange,
    Observer,
    ObserverAuthError,
    ObserverError,
    ObserverPermanentError,
    ObserverQuotaError,
    ObserverRequest,
    ObserverTransientError,
    OpenAIObserver,
    Usage,
    build_observer,
)
from worker.observers.errors import classify_status, reset_after_s, retry_after_s
from worker.observers.factory import NO_OBSERVER_MESSAGE
from worker.settings import load_settings

SYSTEM = "You observe a coding session and answer in XML."
HISTORY = [
    Exchange(user="batch one", assistant="<observation>1</observation>"),
    Exchange(user="batch two", assistant="<observation>2</observation>"),
]
REQUEST = ObserverRequest(system=SYSTEM, history=HISTORY, user="batch three")
MakeObserver = Callable[..., Observer]


def _make_anthropic(base: str, *, timeout_s: float = 5.0) -> Observer:
    return AnthropicObserver(
        api_key="sk-ant-test",
        base_url=base,
        model="claude-test",
        max_tokens=321,
        temperature=0.3,
        timeout_s=timeout_s,
    )


def _make_openai(base: str, *, timeout_s: float = 5.0) -> Observer:
    return OpenAIObserver(
        api_key="sk-oai-test",
        base_url=base + "/v1",
        model="gpt-test",
        max_tokens=321,
        temperature=0.3,
        timeout_s=timeout_s,
    )


# Building an SDK client loads the CA bundle (~50 ms), so the fake and one observer per
# provider live for the whole module, on the module's event loop; each test resets the fake.
MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(name="fake", scope="module")
def _fix_fake() -> Iterator[FakeObserver]:
    fake = FakeObserver()
    yield fake
    fake.close()


@pytest.fixture(name="fake_observer")
def _fix_fake_observer(fake: FakeObserver) -> FakeObserver:
    fake.reset()
    return fake


@pytest_asyncio.fixture(name="shared", scope="module", loop_scope="module")
async def _fix_shared(fake: FakeObserver) -> AsyncIterator[dict[str, Observer]]:
    shared = {"anthropic": _make_anthropic(fake.url), "openai": _make_openai(fake.url)}
    yield shared
    for observer in shared.values():
        await observer.aclose()


@pytest.fixture(name="observer", params=["anthropic", "openai"])
def _fix_observer(request: pytest.FixtureRequest, shared: dict[str, Observer]) -> Observer:
    return shared[request.param]


@pytest_asyncio.fixture(name="observers", loop_scope="module")
async def _fix_observers() -> AsyncIterator[list[Observer]]:
    """Observers a test builds itself; closed afterwards so no socket outlives the test."""
    made: list[Observer] = []
    yield made
    for observer in made:
        await observer.aclose()


@pytest.fixture(name="make", params=["anthropic", "openai"])
def _fix_make(request: pytest.FixtureRequest, observers: list[Observer]) -> MakeObserver:
    factory = _make_anthropic if request.param == "anthropic" else _make_openai

    def make(base: str, *, timeout_s: float = 5.0) -> Observer:
        observer = factory(base, timeout_s=timeout_s)
        observers.append(observer)
        return observer

    return make


@MODULE_LOOP
async def test_anthropic_round_trip_caches_the_system_prompt(
    fake_observer: FakeObserver, shared: dict[str, Observer]
) -> None:
    observer = shared["anthropic"]
    fake_observer.script(Reply(text="<observation>3</observation>", model="claude-test-20990101"))

    reply = await observer.complete(REQUEST)

    assert reply.text == "<observation>3</observation>"
    assert (reply.provider, reply.model) == ("anthropic", "claude-test-20990101")
    assert reply.latency_ms > 0
    [sent] = fake_observer.requests
    assert (sent.path, sent.system, sent.user) == (ANTHROPIC_PATH, SYSTEM, "batch three")
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert sent.headers["content-type"] == "application/json"  # the body is sent pre-encoded
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == 321
    assert "temperature" not in sent.body  # API 2026-10-21 rejects sampling parameters
    assert sent.body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert sent.body["messages"] == [
        {"role": "user", "content": "batch one"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "<observation>1</observation>"}],
        },
        {"role": "user", "content": "batch two"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "<observation>2</observation>",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
        {"role": "user", "content": "batch three"},
    ]


@MODULE_LOOP
async def test_anthropic_leaves_out_turns_with_an_empty_reply(
    fake_observer: FakeObserver, shared: dict[str, Observer]
) -> None:
    observer = shared["anthropic"]
    history = [
        Exchange(user="skipped batch", assistant=""),
        Exchange(user="kept", assistant="<x/>"),
    ]

    await observer.complete(ObserverRequest(system=SYSTEM, history=history, user="now"))

    [sent] = fake_observer.requests
    assert [m["role"] for m in sent.messages] == ["user", "assistant", "user"]
    assert [sent.messages[0]["content"], sent.messages[2]["content"]] == ["kept", "now"]


@MODULE_LOOP
async def test_openai_round_trip_sends_system_then_history_then_user(
    fake_observer: FakeObserver, shared: dict[str, Observer]
) -> None:
    observer = shared["openai"]
    fake_observer.script(Reply(text="<observation>3</observation>"))

    reply = await observer.complete(REQUEST)

    assert (reply.text, reply.provider, reply.model) == (
        "<observation>3</observation>",
        "openai",
        "gpt-test",
    )
    [sent] = fake_observer.requests
    assert (sent.path, sent.system, sent.user) == (OPENAI_PATH, SYSTEM, "batch three")
    assert sent.headers["authorization"] == "Bearer sk-oai-test"
    assert sent.headers["content-type"] == "application/json"
    assert (sent.body["model"], sent.body["max_tokens"], sent.body["temperature"]) == (
        "gpt-test",
        321,
        0.3,
    )
    assert sent.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "batch one"},
        {"role": "assistant", "content": "<observation>1</observation>"},
        {"role": "user", "content": "batch two"},
        {"role": "assistant", "content": "<observation>2</observation>"},
        {"role": "user", "content": "batch three"},
    ]


@MODULE_LOOP
async def test_openai_without_a_key_works_with_a_local_server(
    fake_observer: FakeObserver, observers: list[Observer]
) -> None:
    observer = OpenAIObserver(
        api_key=None,
        base_url=fake_observer.openai_url,
        model="llama3.2",
        max_tokens=100,
        temperature=0.0,
        timeout_s=5.0,
    )
    observers.append(observer)
    fake_observer.script(Reply(text="ok"))

    assert (await observer.complete(REQUEST)).text == "ok"
    assert fake_observer.requests[0].headers["authorization"] == "Bearer not-needed"


@MODULE_LOOP
async def test_usage_counts_cached_and_cache_written_tokens_as_input(
    fake_observer: FakeObserver, observer: Observer
) -> None:
    fake_observer.script(
        Reply(
            text="x",
            input_tokens=100,
            cached_input_tokens=60,
            cache_write_tokens=10,
            output_tokens=7,
        )
    )
    reply = await observer.complete(REQUEST)
    assert reply.usage == Usage(input_tokens=100, cached_input_tokens=60, output_tokens=7)


@MODULE_LOOP
async def test_empty_reply_is_empty_text(fake_observer: FakeObserver, observer: Observer) -> None:
    fake_observer.script(Reply(text=""))
    assert (await observer.complete(REQUEST)).text == ""


CREDIT_TOO_LOW = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
OPENAI_QUOTA = "You exceeded your current quota, please check your plan and billing details."
OPENAI_RATE_LIMIT = (
    "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3. "
    "Please try again in 20s. You can increase your rate limit by adding a payment method "
    "at https://platform.openai.com/account/billing."
)


@MODULE_LOOP
@pytest.mark.parametrize(
    ("reply", "expected", "wait_s"),
    [
        pytest.param(
            Reply(status=429, error_type="rate_limit_error", headers={"retry-after": "1"}),
            ObserverTransientError,
            1.0,
            id="429-retry-after",
        ),
        pytest.param(
            Reply(status=429, error_type="rate_limit_error", headers={"retry-after-ms": "250"}),
            ObserverTransientError,
            0.25,
            id="429-retry-after-ms",
        ),
        pytest.param(
            Reply(status=429, error_type="rate_limit_exceeded", error_message=OPENAI_RATE_LIMIT),
            ObserverTransientError,
            None,
            id="429-rate-limit-mentioning-billing",
        ),
        pytest.param(
            Reply(
                status=429,
                error_type="insufficient_quota",
                error_message=OPENAI_QUOTA,
                headers={"retry-after": "120"},
            ),
            ObserverQuotaError,
            120.0,
            id="429-insufficient-quota",
        ),
        pytest.param(
            Reply(status=429, error_type="rate_limit_error", error_message="Quota exceeded"),
            ObserverQuotaError,
            None,
            id="429-quota-prose",
        ),
        pytest.param(
            Reply(status=402, error_type="billing_error", error_message="pay up"),
            ObserverQuotaError,
            None,
            id="402",
        ),
        pytest.param(
            Reply(status=400, error_type="invalid_request_error", error_message=CREDIT_TOO_LOW),
            ObserverQuotaError,
            None,
            id="400-credit-balance",
        ),
        pytest.param(
            Reply(status=401, error_type="authentication_error", error_message="invalid x-api-key"),
            ObserverAuthError,
            None,
            id="401",
        ),
        pytest.param(
            Reply(status=403, error_type="permission_error", error_message="not allowed"),
            ObserverAuthError,
            None,
            id="403",
        ),
        pytest.param(
            Reply(status=400, error_type="invalid_request_error", error_message="bad field"),
            ObserverPermanentError,
            None,
            id="400",
        ),
        pytest.param(
            Reply(status=404, error_type="not_found_error", error_message="model: nope"),
            ObserverPermanentError,
            None,
            id="404-model",
        ),
        pytest.param(
            Reply(status=413, error_type="request_too_large", error_message="too big"),
            ObserverPermanentError,
            None,
            id="413",
        ),
        pytest.param(Reply(status=408), ObserverTransientError, None, id="408"),
        pytest.param(Reply(status=409), ObserverTransientError, None, id="409"),
        pytest.param(Reply(status=500), ObserverTransientError, None, id="500"),
        pytest.param(
            Reply(status=503, headers={"retry-after": "3"}), ObserverTransientError, 3.0, id="503"
        ),
        pytest.param(
            Reply(status=529, error_type="overloaded_error", error_message="Overloaded"),
            ObserverTransientError,
            None,
            id="529-overloaded",
        ),
        pytest.param(
            Reply(status=502, body="<html><body>Bad Gateway</body></html>"),
            ObserverTransientError,
            None,
            id="502-html",
        ),
    ],
)
@MODULE_LOOP
async def test_http_errors_map_to_observer_errors_after_one_attempt(
    fake_observer: FakeObserver,
    observer: Observer,
    reply: Reply,
    expected: type[ObserverError],
    wait_s: float | None,
) -> None:
    fake_observer.script(reply)

    with pytest.raises(ObserverError) as caught:
        await observer.complete(REQUEST)

    assert type(caught.value) is expected
    assert len(fake_observer.requests) == 1  # the SDK's own retries are off
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{observer.provider} observer: HTTP {reply.status}")
    if reply.error_message:
        assert " ".join(reply.error_message.split())[:60] in message
    if isinstance(caught.value, ObserverTransientError):
        assert caught.value.retry_after_s == wait_s
    if isinstance(caught.value, ObserverQuotaError):
        assert caught.value.reset_after_s == wait_s


@MODULE_LOOP
async def test_auth_error_names_the_key_variable(
    fake_observer: FakeObserver, observer: Observer
) -> None:
    fake_observer.script(Reply(status=401, error_message="invalid key"))
    with pytest.raises(ObserverAuthError, match=f"check {observer.provider.upper()}_API_KEY"):
        await observer.complete(REQUEST)


@MODULE_LOOP
async def test_html_error_page_is_reduced_to_its_text(
    fake_observer: FakeObserver, observer: Observer
) -> None:
    fake_observer.script(Reply(status=502, body="<html><body><h1>Bad Gateway</h1></body></html>"))
    with pytest.raises(ObserverTransientError) as caught:
        await observer.complete(REQUEST)
    assert str(caught.value) == f"{observer.provider} observer: HTTP 502 Bad Gateway"


@MODULE_LOOP
@pytest.mark.parametrize("body", ['{"id": "x", "note": "not a message"}', "<html>ok</html>"])
async def test_a_200_that_is_not_an_api_reply_is_a_permanent_error(
    fake_observer: FakeObserver, observer: Observer, body: str
) -> None:
    fake_observer.script(Reply(status=200, body=body))
    with pytest.raises(ObserverPermanentError, match=r"HTTP 200 reply from .* is not a"):
        await observer.complete(REQUEST)
    # The next call is unaffected.
    fake_observer.script(Reply(text="<observation>ok</observation>"))
    assert (await observer.complete(REQUEST)).text == "<observation>ok</observation>"


@MODULE_LOOP
async def test_no_reply_within_the_timeout_is_transient(
    fake_observer: FakeObserver, make: MakeObserver
) -> None:
    observer = make(fake_observer.url, timeout_s=0.3)
    fake_observer.hold()
    with pytest.raises(ObserverTransientError, match=r"no reply within 0\.3s"):
        await observer.complete(REQUEST)
    assert len(fake_observer.requests) == 1


@MODULE_LOOP
async def test_connection_refused_is_transient(make: MakeObserver) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ObserverTransientError, match=r"cannot reach http://127\.0\.0\.1"):
        await make(closed).complete(REQUEST)


NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Fri, 01 May 2026 12:01:00 GMT"}, 60.0),
        ({"retry-after": "Fri, 01 May 2026 11:00:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_s(headers, now=NOW) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"anthropic-ratelimit-tokens-reset": "2026-05-01T12:05:00Z"}, 300.0),
        ({"x-ratelimit-reset-tokens": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-requests": "1h2m3.5s"}, 3723.5),
        ({"x-ratelimit-reset-requests": "20ms"}, 0.02),
        (
            {
                "x-ratelimit-reset-requests": "2s",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-tokens": "6m0s",
                "x-ratelimit-remaining-tokens": "5000",
            },
            2.0,
        ),
        (
            {
                "anthropic-ratelimit-requests-reset": "2026-05-01T12:00:10Z",
                "anthropic-ratelimit-tokens-reset": "2026-05-01T12:01:00Z",
            },
            60.0,
        ),
        ({"retry-after": "30", "x-ratelimit-reset-tokens": "6m0s"}, 30.0),
        ({"x-ratelimit-reset-tokens": "later"}, None),
        ({"anthropic-ratelimit-unified-reset": str(int(NOW.timestamp()) + 7200)}, 7200.0),
    ],
)
def test_quota_reset_headers(headers: dict[str, str], expected: float | None) -> None:
    assert reset_after_s(headers, now=NOW) == pytest.approx(expected)


def test_quota_error_reads_reset_from_rate_limit_headers() -> None:
    error = classify_status(
        "openai",
        429,
        OPENAI_QUOTA,
        headers={"x-ratelimit-reset-tokens": "1m30s"},
        error_type="insufficient_quota",
        key_variable="OPENAI_API_KEY",
        now=NOW,
    )
    assert isinstance(error, ObserverQuotaError)
    assert error.reset_after_s == 90.0


@MODULE_LOOP
@pytest.mark.parametrize(
    ("environ", "kind", "model"),
    [
        ({"ANTHROPIC_API_KEY": "k"}, AnthropicObserver, "claude-haiku-4-5"),
        ({"ANTHROPIC_API_KEY": "k", "MEMQ_MODEL": "claude-x"}, AnthropicObserver, "claude-x"),
        ({"OPENAI_API_KEY": "k"}, OpenAIObserver, "gpt-4o-mini"),
        (
            {"OPENAI_BASE_URL": "http://localhost:11434/v1", "MEMQ_MODEL": "llama3.2"},
            OpenAIObserver,
            "llama3.2",
        ),
        (
            {"MEMQ_OBSERVER": "openai", "ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "o"},
            OpenAIObserver,
            "gpt-4o-mini",
        ),
    ],
)
@MODULE_LOOP
async def test_factory_picks_the_configured_provider(
    observers: list[Observer], environ: dict[str, str], kind: type, model: str
) -> None:
    observer = build_observer(load_settings(environ))
    observers.append(observer)
    assert isinstance(observer, kind)
    assert observer.model == model


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@MODULE_LOOP
async def test_factory_observer_uses_the_settings(
    fake_observer: FakeObserver, observers: list[Observer], provider: str
) -> None:
    if provider == "anthropic":
        environ = {"ANTHROPIC_API_KEY": "k1", "ANTHROPIC_BASE_URL": fake_observer.url}
    else:
        environ = {"OPENAI_API_KEY": "k1", "OPENAI_BASE_URL": fake_observer.openai_url}
    settings = load_settings({**environ, "MEMQ_MAX_TOKENS": "77", "MEMQ_MODEL": "m1"})
    observer = build_observer(settings)
    observers.append(observer)

    await observer.complete(REQUEST)

    [sent] = fake_observer.requests
    assert (sent.provider, sent.headers["authorization"]) == (provider, "Bearer k1")
    assert (sent.body["model"], sent.body["max_tokens"]) == ("m1", 77)


def test_factory_without_a_provider_says_what_to_set() -> None:
    with pytest.raises(ConfigError) as caught:
        build_observer(load_settings({}))
    message = str(caught.value)
    assert message == NO_OBSERVER_MESSAGE
    assert "\n" not in message
    for name in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY", "MEMQ_MODEL"):
        assert name in message
    assert "http://localhost:11434/v1" in message


def test_factory_anthropic_without_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_observer(load_settings({"MEMQ_OBSERVER": "anthropic"}))


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "https://u:S3cretPw@proxy.example"},
         "ANTHROPIC_BASE_URL must not carry user:password@"),
        ({"OPENAI_BASE_URL": "http://svc:S3cretPw@127.0.0.1:1/v1"},
         "OPENAI_BASE_URL must not carry user:password@"),
        ({"OPENAI_BASE_URL": "localhost:11434/v1"}, "OPENAI_BASE_URL must be an http:// or"),
    ],
)  # fmt: skip
def test_factory_refuses_a_base_url_it_cannot_use_without_echoing_secrets(
    environ: dict[str, str], reason: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build_observer(load_settings(environ))
    assert str(caught.value).startswith(reason)
    assert "S3cretPw" not in str(caught.value)


@MODULE_LOOP
async def test_an_empty_anthropic_key_is_sent_and_its_401_names_the_variable(
    fake_observer: FakeObserver, observers: list[Observer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the OpenAI-compatible adapter swaps an empty key for a placeholder: an empty
    # Anthropic key must not fall back to the SDK's own environment lookup.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    observer = AnthropicObserver(
        api_key="", base_url=fake_observer.url, model="claude-test", max_tokens=32,
        temperature=0.0, timeout_s=5.0,
    )  # fmt: skip
    observers.append(observer)
    fake_observer.script(Reply(status=401, error_message="invalid x-api-key"))
    with pytest.raises(ObserverAuthError, match="check ANTHROPIC_API_KEY"):
        await observer.complete(REQUEST)
    [sent] = fake_observer.requests
    assert not sent.headers.get("x-api-key")  # the request went out, with no key in it


def test_the_protocol_and_errors_load_without_the_sdks() -> None:
    # The SDKs take seconds to import: only build_observer, once configured, pulls one in.
    code = (
        "import sys\n"
        "import worker.observers.protocol, worker.observers.errors, worker.observers.sdk\n"
        "print('anthropic' in sys.modules, 'openai' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["False", "False"]
