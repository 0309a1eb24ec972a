"""Settings: read once from a TOML file and MEMQ_* environment variables, then passed down."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from worker.errors import ConfigError
from worker.secret import Secret

if TYPE_CHECKING:
    from pipeline.turns.decide import Policy
    from worker.backoff import Backoff

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]

# Read by scripts/bootstrap.sh, or by memq's OpenCode plugin (MEMQ_AGENT_URL: where it posts),
# not by memq itself: memq commands started in the same environment must not refuse them.
_LAUNCHER_VARIABLES = frozenset(
    {"MEMQ_PYTHON", "MEMQ_EXTRAS", "MEMQ_NEED_CHROMIUM", "MEMQ_AGENT_URL"}
)
# Settings memq once read and now holds as constants where they are used: nobody had a reason to
# change them. A user's old environment or settings file may still name one; it is skipped with
# one warning line rather than refused (docs/settings.md, "Settings no longer read").
_NO_LONGER_READ = {
    "MEMQ_SPOOL_MAX_BYTES": "the spool's cap is 64 MiB, SPOOL_MAX_BYTES in worker/ingest/spool.py",
    "MEMQ_HISTORY_CHARS": "re-sent history is capped at 40,000 characters,"
    " HISTORY_CHARS in pipeline/prompting/conversation.py",
    "MEMQ_PROCESSED_RETENTION_DAYS": "the replay guard keeps ids 7 days,"
    " PROCESSED_RETENTION in worker/sessions/jobs.py",
    "MEMQ_DEDUPE_WINDOW_S": "a published event id is remembered 7 days,"
    " DEDUPE_WINDOW_S in worker/ingest/producer.py",
}
# The SDKs' own variables, honoured as they are (DESIGN, Configuration).
_SDK_VARIABLES = {
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "ANTHROPIC_BASE_URL": "anthropic_base_url",
    "OPENAI_API_KEY": "openai_api_key",
    "OPENAI_BASE_URL": "openai_base_url",
}


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every setting memq reads; field names are the MEMQ_* variables lowercased."""

    redis_url: str | None = None
    prefix: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = "memq"
    data_dir: str = "~/.local/share/memq"
    database_url: str | None = None
    observer: Literal["anthropic", "openai", "claude-code"] | None = None
    model: str | None = None
    mode: str = "code"
    modes_dir: str | None = None
    project: str | None = None
    log_format: Literal["console", "json"] = "console"
    # ingest
    max_event_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 1024 * 1024
    max_pending_per_session: PositiveInt = 10_000
    field_budget_chars: Annotated[int, msgspec.Meta(ge=1000)] = 16_000
    hook_redis_timeout_ms: PositiveInt = 300
    # replicas that must hold a publish before it counts as published (Redis WAIT; 0: none)
    publish_wait_replicas: NonNegativeInt = 0
    # worker
    concurrency: PositiveInt = 8
    batch_max_events: PositiveInt = 8
    batch_max_chars: Annotated[int, msgspec.Meta(ge=1000)] = 60_000
    batch_wait_ms: NonNegativeInt = 500
    # the longest a tool call waits for its turn to fill (a full batch or a prompt, summary
    # request or session end makes the turn due at once)
    batch_max_wait_s: NonNegativeFloat = 30.0
    job_timeout_s: PositiveFloat = 90.0
    quota_pause_s: PositiveFloat = 300.0
    max_attempts: PositiveInt = 5
    retry_base_s: PositiveFloat = 2.0
    retry_max_s: PositiveFloat = 120.0
    history_turns: NonNegativeInt = 0  # raw exchanges re-sent (0: none)
    max_tokens: PositiveInt = 4096
    temperature: NonNegativeFloat = 0.2
    observer_timeout_s: PositiveFloat = 60.0  # the whole call: connect, wait and read
    # MEMQ_OBSERVER=claude-code: the `claude` CLI to run (unset: the one claude-agent-sdk
    # bundles) and how many warm CLI processes (~200 MB each) a worker keeps (0: one per call)
    claude_code_cli: str | None = None
    claude_code_warm: NonNegativeInt = 4
    # the most of one observer reply read; a longer one is dropped (`dropped:too_large`)
    observer_max_reply_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 1024 * 1024
    # observations one turn stores; the rest are dropped with a reason (`stored:capped`)
    max_observations_per_turn: PositiveInt = 50
    feed_maxlen: PositiveInt = 10_000
    # memq_silent_sessions counts sessions whose tool calls went this long without an observation
    silent_alert_s: PositiveFloat = 3600.0
    # fleet-wide limits and fairness (rate limits and budgets: 0 = off)
    rate_limit_rpm: NonNegativeInt = 0  # observer calls per minute per provider and model
    rate_limit_tpm: NonNegativeInt = 0  # observer tokens (input + output) per minute, likewise
    turns_per_job: PositiveInt = 4  # observer turns before a session goes to the back of the queue
    budget_tokens_per_day: NonNegativeInt = 0  # tokens (input + output) per UTC day, all projects
    budget_tokens_per_day_per_project: NonNegativeInt = 0  # tokens per UTC day for each project
    budget_recheck_s: PositiveFloat = 60.0  # how often a budget-paused session looks again
    # observer prices per million tokens, for a spend figure in `memq stats` and the UI's panel;
    # unset: tokens only (memq never guesses a price). Set all three or none.
    price_input_per_mtok: NonNegativeFloat | None = None
    price_cached_per_mtok: NonNegativeFloat | None = None
    price_output_per_mtok: NonNegativeFloat | None = None
    # search
    # the vector index: `on` (embedded, in the data dir), `off`, or a Chroma server URL
    chroma: Annotated[str, msgspec.Meta(pattern=r"^(on|off|https?://\S+)$")] = "on"
    # `module:callable` returning a chroma EmbeddingFunction; unset: bundled all-MiniLM-L6-v2
    embedding: str | None = None
    # character budget of `memq context` (and of the SessionStart hook's context)
    context_chars: Annotated[int, msgspec.Meta(ge=500)] = 8000
    # the longest one full-text search may run (CLI, UI, MCP) before it answers an error
    search_timeout_s: PositiveFloat = 10.0
    # character cap of one `memq mcp` tool answer
    mcp_max_chars: Annotated[int, msgspec.Meta(ge=1000)] = 12_000
    # comma-separated names of memq's MCP server in the agents' configs: calls to their tools
    # are memq's own answers, never observed again
    mcp_server_names: str = "memq"
    # fan-out: web UI and Telegram bot
    ui_host: str = "127.0.0.1"  # anything but loopback needs ui_token
    ui_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 8765  # `memq ui` and `memq up`
    ui_token: Secret | None = None  # required off loopback; Bearer header or ?token=
    ui_max_streams: PositiveInt = 64  # open live-feed (SSE) connections; past it a 503
    # the HTTP hook endpoint (`memq agent`, part of `memq up`)
    agent_host: str = "127.0.0.1"  # anything but loopback needs agent_token
    agent_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 8766
    agent_token: Secret | None = None  # when set, every hook request needs `Bearer <token>`
    agent_max_body_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 16 * 1024 * 1024
    # open connections at once (at most half the open-file limit); past it a 503 and close
    agent_max_connections: Annotated[int, msgspec.Meta(ge=8)] = 1000
    agent_idle_timeout_s: PositiveFloat = 5.0  # a connection with no request is closed then
    agent_stall_s: PositiveFloat = 10.0  # publisher without progress this long: /healthz 503
    telegram_token: Secret | None = None  # the bot's token from @BotFather
    telegram_api_url: str = "https://api.telegram.org"  # `/bot<token>/` is appended
    telegram_chat_ids: str = ""  # comma-separated allow-list; no other chat is ever messaged
    telegram_types: str = "security_alert,security_note"  # type ids (`summary` too), or `*`
    telegram_concepts: str = ""  # comma-separated concept ids; a match also sends the row
    # the SDKs' own variables (not MEMQ_*)
    anthropic_api_key: Secret | None = None
    anthropic_base_url: str | None = None
    openai_api_key: Secret | None = None
    openai_base_url: str | None = None

    def __post_init__(self) -> None:
        prices = (self.price_input_per_mtok, self.price_cached_per_mtok, self.price_output_per_mtok)
        if any(p is not None for p in prices) and any(p is None for p in prices):
            # msgspec reports a ValueError here as a ValidationError, which load_settings words.
            raise ValueError(
                "set MEMQ_PRICE_INPUT_PER_MTOK, MEMQ_PRICE_CACHED_PER_MTOK and"
                " MEMQ_PRICE_OUTPUT_PER_MTOK together, or none of them"
            )

    @property
    def retry_backoff(self) -> Backoff:
        """How a failing observer turn or job waits: MEMQ_RETRY_BASE_S doubling to _MAX_S."""
        # Imported here: `memq hook` reads Settings on every tool call and never retries.
        from worker.backoff import Backoff

        return Backoff(base_s=self.retry_base_s, max_s=self.retry_max_s)

    @property
    def decision_policy(self) -> Policy:
        """The settings the turn decision table reads (`pipeline.turns.decide`)."""
        from pipeline.turns.decide import Policy

        return Policy(
            quota_pause_s=self.quota_pause_s,
            max_attempts=self.max_attempts,
            retry_base_s=self.retry_base_s,
            retry_max_s=self.retry_max_s,
        )

    @property
    def data_path(self) -> Path:
        """The data directory with `~` expanded."""
        return Path(self.data_dir).expanduser()

    @property
    def own_mcp_servers(self) -> tuple[str, ...]:
        """MEMQ_MCP_SERVER_NAMES as a tuple of names."""
        return tuple(n.strip() for n in self.mcp_server_names.split(",") if n.strip())

    @property
    def extra_modes_dirs(self) -> list[Path]:
        """MEMQ_MODES_DIR as the list load_mode searches before the bundled modes."""
        return [Path(self.modes_dir).expanduser()] if self.modes_dir else []

    @property
    def observer_provider(self) -> Literal["anthropic", "openai", "claude-code"] | None:
        """The configured provider, or the one the SDK variables imply, or None."""
        if self.observer is not None:
            return self.observer
        if self.anthropic_api_key is not None:
            return "anthropic"
        if self.openai_base_url is not None or self.openai_api_key is not None:
            return "openai"
        return None


def settings_variables() -> dict[str, str]:
    """Map each settings field to the environment variable that sets it."""
    sdk = {field: var for var, field in _SDK_VARIABLES.items()}
    return {f: sdk.get(f, f"MEMQ_{f.upper()}") for f in Settings.__struct_fields__}


def load_settings(
    environ: Mapping[str, str], file_values: Mapping[str, Any] | None = None
) -> Settings:
    """Merge settings-file values with the environment (which wins) into one Settings."""
    env: dict[str, Any] = {}
    unknown: list[str] = []
    known = set(Settings.__struct_fields__)
    file_values = dict(file_values or {})
    for field in [f for f in file_values if f"MEMQ_{f.upper()}" in _NO_LONGER_READ]:
        del file_values[field]
        _warn_no_longer_read(f"MEMQ_{field.upper()}")
    for name, value in environ.items():
        if name in _SDK_VARIABLES:
            if value:
                env[_SDK_VARIABLES[name]] = value
        elif name in _NO_LONGER_READ:
            _warn_no_longer_read(name)
        elif name.startswith("MEMQ_") and name not in _LAUNCHER_VARIABLES:
            field = name.removeprefix("MEMQ_").lower()
            if field in known:
                env[field] = value
            elif field != "config":
                unknown.append(name)
    if "mode" not in env and environ.get("CLAUDE_MEM_MODE"):
        env["mode"] = environ["CLAUDE_MEM_MODE"]  # the original's variable, honoured
    if unknown:
        raise ConfigError(f"unknown setting {', '.join(sorted(unknown))}: see docs/settings.md")
    merged = {**file_values, **env}
    try:
        return msgspec.convert(merged, Settings, strict=False, dec_hook=_decode_secret)
    except msgspec.ValidationError as e:
        raise ConfigError(f"invalid setting: {_name_variable(str(e))}") from e


def settings_from_environment(environ: Mapping[str, str]) -> Settings:
    """Settings from MEMQ_CONFIG (a TOML file, optional) and the environment, which wins."""
    config = environ.get("MEMQ_CONFIG")
    file_values = read_settings_file(Path(config).expanduser()) if config else None
    return load_settings(environ, file_values)


def read_settings_file(path: Path) -> dict[str, Any]:
    """Read a TOML settings file; keys are settings field names (lowercase)."""
    import tomllib  # here, not at the top: the Claude Code hook rarely has a settings file

    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f"settings file {path} does not exist") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"settings file {path} is not valid TOML: {e}") from e


def _warn_no_longer_read(name: str) -> None:
    # stdlib logging, not structlog: settings are read before logging is configured (the hook
    # never configures it), and stdlib's last-resort handler then writes the line to stderr,
    # never to stdout, which the SessionStart hook answers on.
    import logging

    logging.getLogger(__name__).warning(
        "%s is set but no longer read: %s; remove it", name, _NO_LONGER_READ[name]
    )


def _decode_secret(kind: type, value: Any) -> Any:
    if kind is Secret and isinstance(value, str):
        return Secret(value)
    raise NotImplementedError


def _name_variable(message: str) -> str:
    # msgspec says "... - at `$.max_pending_per_session`"; users set MEMQ_MAX_PENDING_PER_SESSION.
    variables = settings_variables()
    for field, var in variables.items():
        message = message.replace(f"`$.{field}`", f"{var} ({field})")
    return message
