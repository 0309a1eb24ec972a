"""The shapes of issue 22: only the secret goes, its quotes, prefixes and neighbours stay."""

from __future__ import annotations

import json

import pytest

from pipeline import redact_secrets, redact_value

PW = "[REDACTED:password-assignment]"
CLI = "[REDACTED:cli-password]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app.secret_key = b'Zx9vQ2rT7k'", f"app.secret_key = b'{PW}'"),
        ("SECRET = r'Zx9vQ2rT7k'", f"SECRET = r'{PW}'"),
        ('SECRET = u"Zx9vQ2rT7k"', f'SECRET = u"{PW}"'),
        ("SECRET = f'Zx9vQ2rT7k'", f"SECRET = f'{PW}'"),
        ("SECRET = rb'Zx9vQ2rT7k'", f"SECRET = rb'{PW}'"),
        ('PASSWORD = """Zx9vQ2rT7k"""', f'PASSWORD = """{PW}"""'),
        ("PASSWORD = '''Zx9vQ2rT7k'''", f"PASSWORD = '''{PW}'''"),
        ('openai_api_key: str = "Zx9vQ2rT7k"', f'openai_api_key: str = "{PW}"'),
        ("token: str | None = 'Zx9vQ2rT7k'", f"token: str | None = '{PW}'"),
        ("apiKey?: string = 'Zx9vQ2rT7k';", f"apiKey?: string = '{PW}';"),
        (
            'api_key: str = Field(default="Zx9vQ2rT7k", alias="KEY")',
            f'api_key: str = Field(default="{PW}", alias="KEY")',
        ),
        ('password = Field("Zx9vQ2rT7k")', f'password = Field("{PW}")'),
        ("os.environ['API_KEY'] = 'Zx9vQ2rT7k'", f"os.environ['API_KEY'] = '{PW}'"),
        ('config["api_key"] = "Zx9vQ2rT7k"', f'config["api_key"] = "{PW}"'),
        (
            'headers["Authorization"] = "Token 7f3k9q2v8m1x"',
            'headers["Authorization"] = "Token [REDACTED:authorization-header]"',
        ),
        ("token: dGVzdA1=", f"token: {PW}"),  # a type annotation's scan does not hide it
        ("redis-cli -a Zx9vQ2rT7k ping", f"redis-cli -a {CLI} ping"),
        ("sqlcmd -S db -U sa -P Zx9vQ2rT7k", f"sqlcmd -S db -U sa -P {CLI}"),
        ("htpasswd -b .htpasswd admin Zx9vQ2rT7k", f"htpasswd -b .htpasswd admin {CLI}"),
        ("htpasswd -nbB admin 'Zx9vQ2rT7k'", f"htpasswd -nbB admin '{CLI}'"),
        ("openssl enc -in a -k Zx9vQ2rT7k", f"openssl enc -in a -k {CLI}"),
        ("openssl rsa -passin pass:Zx9vQ2rT7k", f"openssl rsa -passin pass:{CLI}"),
        ("<password>Zx9vQ2rT7k</password>", f"<password>{PW}</password>"),
        (
            '<add key="ClearTextPassword" value="Zx9vQ2rT7k" />',
            f'<add key="ClearTextPassword" value="{PW}" />',
        ),
        ("define('DB_PASSWORD', 'Zx9vQ2rT7k');", f"define('DB_PASSWORD', '{PW}');"),
        ("ENV API_TOKEN Zx9vQ2rT7k", f"ENV API_TOKEN {PW}"),
        ('ENV API_TOKEN "Zx9vQ2rT7k"', f'ENV API_TOKEN "{PW}"'),
        ("db:5432:app:app:Zx9vQ2rT7k", "db:5432:app:app:[REDACTED:pgpass-password]"),
        (
            "aws configure set aws_secret_access_key Zx9vQ2rT7kLm3Pz8Wv4Rb6",
            "aws configure set aws_secret_access_key [REDACTED:aws-secret-key]",
        ),
    ],
)
def test_only_the_secret_goes(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
    assert redact_secrets(expected) == expected


def test_json_inside_a_json_string_loses_its_secret_and_keeps_its_escapes() -> None:
    inner = json.dumps({"user": "app", "password": 'Zx9"vQ\\2rT7k'})
    text = json.dumps({"body": inner})
    out = redact_secrets(text)
    assert json.loads(json.loads(out)["body"]) == {"user": "app", "password": PW}


def test_a_secrets_manager_answer_loses_the_whole_secret_string() -> None:
    answer = {
        "ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf",
        "SecretString": json.dumps({"username": "app", "password": "Zx9vQ2rT7k"}),
    }
    out = json.loads(redact_secrets(json.dumps(answer, indent=4)))
    assert out == {**answer, "SecretString": "[REDACTED:secretsmanager-secret]"}


def test_only_sensitive_terraform_outputs_lose_their_value() -> None:
    outputs = {
        "db_host": {"sensitive": False, "type": "string", "value": "db.internal"},
        "db": {"sensitive": True, "type": ["object", {"p": "string"}], "value": {"p": "Zx9v"}},
        "token": {"sensitive": True, "type": "string", "value": "Zx9vQ2rT7k"},
    }
    out = redact_secrets(json.dumps(outputs, indent=2))
    assert '"value": "db.internal"' in out
    # An object value goes whole, braces included; a string keeps its quotes.
    assert '"value": [REDACTED:terraform-sensitive-output]\n' in out
    assert '"value": "[REDACTED:terraform-sensitive-output]"' in out
    assert "Zx9v" not in out


@pytest.mark.parametrize(
    "text",
    [
        "passwd:         files systemd",
        "passwd: compat",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
        '"ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf"',
        "def login(password: str) -> bool:",
        "token: Optional[str] = None",
        "api_key: str = Field(..., description='the key')",
        "os.environ['API_KEY'] = api_key",
        "htpasswd -c .htpasswd admin",
        "openssl enc -d -in x -out y -pass env:BACKUP_PASS",
        "ENV PATH /usr/local/bin:$PATH",
    ],
)
def test_ordinary_text_of_those_shapes_survives(text: str) -> None:
    assert redact_secrets(text) == text


def test_a_secret_string_key_in_a_json_value_is_a_secret_name() -> None:
    out = redact_value({"Name": "prod/db", "SecretString": "Zx9vQ2rT7k"})
    assert out == {"Name": "prod/db", "SecretString": PW}
