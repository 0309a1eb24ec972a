"""Secret redaction: typed markers for real-looking secrets, look-alikes untouched, linear time."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import SECRET_KINDS, SecretMatch, find_secrets, redact_secrets, redact_value
from tests.support.secret_samples import LOOKALIKES, POSITIVES, Lookalike, Positive


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def test_corpora_are_large_and_cover_every_kind() -> None:
    assert len(POSITIVES) >= 40
    assert len(LOOKALIKES) >= 40
    assert {p.kind for p in POSITIVES} == set(SECRET_KINDS)


@pytest.mark.parametrize("case", POSITIVES, ids=lambda p: f"{p.kind}:{p.text[:24]}")
def test_every_corpus_secret_is_replaced_by_its_typed_marker(case: Positive) -> None:
    out = redact_secrets(case.text)
    assert case.secret in case.text
    assert case.secret not in out
    assert marker(case.kind) in out
    assert [m.kind for m in find_secrets(case.text)] == [case.kind]


@pytest.mark.parametrize("case", LOOKALIKES, ids=lambda c: c.why)
def test_every_corpus_lookalike_survives_byte_for_byte(case: Lookalike) -> None:
    assert redact_secrets(case.text) == case.text
    assert find_secrets(case.text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PASSWORD=hunter2x", "PASSWORD=[REDACTED:password-assignment]"),
        ("db_password: 'hunter2x'", "db_password: '[REDACTED:password-assignment]'"),
        ('"apiKey":"abc123xyz"', '"apiKey":"[REDACTED:password-assignment]"'),
        ("f(password=hunter2x)", "f(password=[REDACTED:password-assignment])"),
        ("token=abc123&next=1", "token=[REDACTED:password-assignment]&next=1"),
        ("$password = 'hunter2x';", "$password = '[REDACTED:password-assignment]';"),
        ("clientSecret?: 'abcdef12'", "clientSecret?: '[REDACTED:password-assignment]'"),
        ("x: password=hunter2x", "x: password=[REDACTED:password-assignment]"),
        ("API_TOKEN ?= abc123xyz", "API_TOKEN ?= [REDACTED:password-assignment]"),
        ("secret_key := 'abc123xyz'", "secret_key := '[REDACTED:password-assignment]'"),
    ],
)
def test_assignments_lose_only_their_value(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_a_long_bare_value_is_redacted_to_its_end() -> None:
    value = "Ab1" * 200  # 600 characters, past the 256 the decision looks at
    assert redact_secrets(f"TOKEN={value} next") == f"TOKEN={marker('password-assignment')} next"


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD_MIN_LENGTH = 8",
        "TOKEN_TYPE=bearer",
        "max_tokens: 4096",
        "token_count=12",
        "primary_key = 'id'",
        "key = 'value'",
        "bypass = 'yes-please'",
        "password=",
        "password: ''",
        'password = ""',
        "PASSWORD=${DB_PASSWORD}",
        "PASSWORD=$DB_PASSWORD",
        "PASSWORD=%DB_PASSWORD%",
        "token: '{{ secrets.TOKEN }}'",
        "token: <token>",
        "secret = 'your-secret-here'",
        "api_key: YOUR_API_KEY",
        "PASSWORD=****",
        "PASSWORD=xxxxxxxx",
        "token: 'ghp_abc...'",
        "password: null",
        "password: false",
        "pin_token: 1234",
        "password: string",
        "password: Optional[str] = None",
        "token = request.headers['X-Token']",
        "secret = config.secret",
        "password = user_password",
        "password == 'literal'",
        "password != hunter2x",
        "password:\n  from_env: DB_PASSWORD",
        "PASSWORD= # empty, then a comment",
    ],
)
def test_assignments_that_are_obviously_not_secrets_survive(text: str) -> None:
    assert redact_secrets(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "postgres://user@host/db",
        "postgres://host:5432/db",
        "https://example.com:8443/a@b",
        "postgres://user:password@localhost/db",
        "postgres://user:${PGPASSWORD}@localhost/db",
        "ssh://git@github.com:22/acme/repo.git",
    ],
)
def test_urls_without_a_real_password_survive(text: str) -> None:
    assert redact_secrets(text) == text


def test_only_the_password_of_a_connection_string_goes() -> None:
    text = "mongodb+srv://admin:Zx9vQ2rT@cluster0.example.net/db?retryWrites=true"
    assert redact_secrets(text) == (
        "mongodb+srv://admin:[REDACTED:connection-string-password]"
        "@cluster0.example.net/db?retryWrites=true"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Bearer x9T2fK7qLm3Pz8Wv4Rb6", "bearer-token"),
        ("ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "github-token"),
        ("AKIA" + "Q7W3E9R2T5Y8U1I4", "aws-access-key"),
    ],
)
def test_tokens_are_replaced_whole_prefix_included(text: str, kind: str) -> None:
    out = redact_secrets(text)
    assert marker(kind) in out
    assert text.split()[-1] not in out
    if kind != "bearer-token":
        assert out == marker(kind)


def test_private_key_blocks_go_whole_and_public_blocks_stay() -> None:
    key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB3d\n-----END EC PRIVATE KEY-----"
    cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert redact_secrets(f"{cert}\n{key}\n{cert}") == f"{cert}\n{marker('private-key')}\n{cert}"


def test_find_secrets_reports_ordered_disjoint_spans() -> None:
    text = "a=1 PASSWORD=hunter2x then ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5 end"
    matches = find_secrets(text)
    assert matches == [
        SecretMatch("password-assignment", 13, 21),
        SecretMatch("github-token", 27, 67),
    ]
    assert [text[m.start : m.end] for m in matches] == [
        "hunter2x",
        "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The same span: the more specific kind names it.
        ("TOKEN=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz", "TOKEN=[REDACTED:jwt]"),
        # The assignment's value runs past the JWT that starts it: the longer span wins.
        (
            "TOKEN=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz#tail next",
            "TOKEN=[REDACTED:password-assignment] next",
        ),
        # A later secret that overlaps an earlier one extends its marker.
        (
            "PASSWORD=ab-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- after",
            "PASSWORD=[REDACTED:password-assignment] after",
        ),
    ],
)
def test_overlapping_secrets_merge_into_one_marker(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"password": "hunter2x"}, {"password": marker("password-assignment")}),
        ({"DB_PASSWORD": 12345678}, {"DB_PASSWORD": marker("password-assignment")}),
        (
            {"env": {"GITHUB_TOKEN": "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"}},
            {"env": {"GITHUB_TOKEN": marker("github-token")}},
        ),
        ({"password": ""}, {"password": ""}),
        (
            {"password": None, "token": True, "secret": 8},
            {"password": None, "token": True, "secret": 8},
        ),
        ({"password": "${PW}"}, {"password": "${PW}"}),
        ({"max_tokens": 100000, "title": "x"}, {"max_tokens": 100000, "title": "x"}),
        (
            {"command": "curl -H 'Authorization: Bearer x9T2fK7qLm3Pz8Wv4Rb6'"},
            {"command": "curl -H 'Authorization: Bearer [REDACTED:bearer-token]'"},
        ),
        (["PASSWORD=hunter2x", 3], ["PASSWORD=[REDACTED:password-assignment]", 3]),
        ({"AKIAQ7W3E9R2T5Y8U1I4": 1}, {marker("aws-access-key"): 1}),
        ({"token": ["Zx9vQ2rT", "$T"]}, {"token": [marker("password-assignment"), "$T"]}),
        (7, 7),
    ],
)
def test_json_values_are_redacted_with_their_keys_as_context(
    value: object, expected: object
) -> None:
    assert redact_value(value) == expected
    assert redact_value(expected) == expected


def test_redacting_a_json_value_does_not_mutate_it() -> None:
    value = {"password": "hunter2x", "list": ["PASSWORD=hunter2x"]}
    redact_value(value)
    assert value == {"password": "hunter2x", "list": ["PASSWORD=hunter2x"]}


@pytest.mark.parametrize(
    "text",
    [
        "sk-" + "a" * 1_000_000,
        "eyJaaaaaaaaaaa." * 70_000,
        "a_key: " * 140_000,
        "key=" * 250_000,
        "a://b:c" * 140_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 30_000,
        "Bearer " * 140_000,
        '"' * 1_000_000,
        'password="' + "\\" * 1_000_000,
        "x-" * 500_000,
        "a" * 1_000_000 + "token=x",
        "--password " * 90_000,
        "1234567890:AA" * 75_000,
        "1Q~" * 300_000,
        "cookie: a=" * 100_000,
        "&sig=" * 200_000,
        "hf_" * 300_000,
        "Authorization: " * 70_000,
        '"password": ["a", ' * 50_000,
        # One or more per family added for issue 22:
        "k: str = " * 110_000,  # type annotations
        "api_key: Optional[str] = None\n" * 33_000,
        "secret = b'$X' " * 70_000,  # string prefixes
        'password = """' + 'x"' * 500_000,  # triple quotes
        '\\"password\\": \\"' + "\\\\" * 500_000,  # JSON inside a JSON string
        ("api_key = Field(" + " " * 290) * 3_400,  # a field's default
        'headers["Authorization"] = ' * 40_000,  # subscripts
        "<password>" * 100_000,  # XML
        '<add key="password" value="' * 40_000,
        "define('DB_PASSWORD', '\n" * 40_000,  # PHP
        "\ndb:5432:app:app:" * 60_000,  # .pgpass
        "\nENV API_TOKEN " * 65_000,  # Dockerfile
        "redis-cli -a " * 80_000,  # password flags
        "sqlcmd -P " * 100_000,
        "htpasswd -b " * 80_000,
        "openssl -k " * 90_000,
        "-passout pass:$X " * 55_000,
        "SK" * 500_000,  # Twilio
        '"sensitive": true, "type": "string", "value": [' * 20_000,  # Terraform
        '"SecretString": "' * 60_000,  # Secrets Manager
        "--secret-string '" * 60_000,
        "aws configure set " * 55_000,
        "arn:aws:secretsmanager:x:1:secret:" * 30_000,
        "passwd: files " * 70_000,
    ],
    ids=lambda text: repr(text[:12]),
)
def test_megabyte_adversarial_inputs_redact_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    redact_secrets(text)
    assert time.perf_counter() - started < 1.0


_NOISE = st.sampled_from(
    [c.text for c in LOOKALIKES]
    + ["=", ":", " ", '"', "'", "-", "_", "/", "+", ".", "@", "\n", "x", "A", "9"]
    + ["token", "PASSWORD", "sk-", "AIza", "eyJ", "Bearer ", "://u:", "-----BEGIN RSA "]
)
_FRAGMENTS = st.one_of(_NOISE, st.sampled_from([p.secret for p in POSITIVES]))
_TEXT = st.one_of(st.text(max_size=80), st.lists(_FRAGMENTS, max_size=12).map("".join))


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(POSITIVES), st.lists(_NOISE, max_size=6).map("".join))
def test_a_secret_next_to_arbitrary_text_never_survives(case: Positive, noise: str) -> None:
    for text in (f"{noise} {case.text}", f"{case.text} {noise}"):
        assert case.secret not in redact_secrets(text)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(_JSON)
def test_redacting_json_values_never_raises_and_is_idempotent(value: object) -> None:
    once = redact_value(value)
    assert redact_value(once) == once


def test_json_corpus_round_trips_through_redact_value() -> None:
    document = json.loads(json.dumps({"items": [p.text for p in POSITIVES]}))
    out = redact_value(document)
    assert isinstance(out, dict)
    for case, text in zip(POSITIVES, out["items"], strict=True):
        assert case.secret not in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "postgresql://app:Xk9#mP2vLq7!@db/app",
            "postgresql://app:[REDACTED:connection-string-password]@db/app",
        ),
        (
            "redis://u:p@ss/w?rd@cache:6379",
            "redis://u:[REDACTED:connection-string-password]@cache:6379",
        ),
        ("PASSWORD=p@ss&word123", "PASSWORD=[REDACTED:password-assignment]"),
        ("DB_PASSWORD=$ecretPass99", "DB_PASSWORD=[REDACTED:password-assignment]"),
        ("password: yourMum-Rocks-1999", "password: [REDACTED:password-assignment]"),
        ('"password": "Sample-Pa55word!"', '"password": "[REDACTED:password-assignment]"'),
        ("SMTP_PASSWORD={Kx8!mQ2#pL}", "SMTP_PASSWORD=[REDACTED:password-assignment]"),
        ("PGPASSWORD=Zx9vQ2rT psql", "PGPASSWORD=[REDACTED:password-assignment] psql"),
        ("REDISCLI_AUTH=Zx9vQ2rT", "REDISCLI_AUTH=[REDACTED:password-assignment]"),
        ("authtoken: Zx9vQ2rTkL", "authtoken: [REDACTED:password-assignment]"),
        ("MAILGUN_KEY=Zx9vQ2rT", "MAILGUN_KEY=[REDACTED:password-assignment]"),
        ("API_KEY_2=Zx9vQ2rT", "API_KEY_2=[REDACTED:password-assignment]"),
        ("mysql -uroot -pZx9vQ2rT shop", "mysql -uroot -p[REDACTED:cli-password] shop"),
        ("curl -u bob:Zx9vQ2rT https://x", "curl -u bob:[REDACTED:cli-password] https://x"),
        ("docker login -u bob -p Zx9vQ2rT", "docker login -u bob -p [REDACTED:cli-password]"),
        ("uv publish --token Zx9vQ2rTkLm", "uv publish --token [REDACTED:cli-password]"),
        ("vault login s.Zx9vQ2rTkLmN", "vault login [REDACTED:cli-password]"),
        ("doctl auth init -t 0f9a2c7e1b8d", "doctl auth init -t [REDACTED:cli-password]"),
    ],
)
def test_the_issue_examples_lose_their_secret(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "password: <your-token>",
        "token: xxxxxxxxxxxxxxxx",
        "PASSWORD=changeme",
        "PASSWORD=${VAR}",
        "PASSWORD=$VAR",
        "policy = password_policy(min_length=12)",
        "header = api_key_header",
        "docker run -u 1000:1000 app",
        "git push -u origin main",
        "PWD=/home/dev/shop",
        "mkdir -p build/out",
        "curl --token-file ~/.tok https://x",
        "echo $PASSWORD | docker login --password-stdin",
        "primary_key = 'id'",
        "sort_key=lambda item: item.name",
        "  --api-key API_KEY    the key to use",
        "usage: twine upload [-p [PASSWORD]] dist/*",
    ],
)
def test_obvious_placeholders_and_code_survive(text: str) -> None:
    assert redact_secrets(text) == text
