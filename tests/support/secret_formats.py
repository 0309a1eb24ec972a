"""Secrets in the shapes of issue 22: code, cloud CLIs, config files, password flags.

`format_cases(rng)` gives (format, text, secret) triples with values made at random on
every run; tests/support/secret_corpus.py adds them to the corpus. No value is real.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable

from tests.support.random_values import ALNUM, HEX, mixed, password, pick

# What WordPress's salt generator draws from, without the quotes and backslash that
# wp-config.php would have to escape.
_WP_CHARS = ALNUM + "!#$%&()*+,-./:;<=>?@[]^_`{|}~"


def _cloud(r: random.Random, add: _Add) -> None:
    p = password(r)
    inner = json.dumps({"username": "app", "password": p, "host": "db.internal"})
    arn = f"arn:aws:secretsmanager:eu-west-1:{pick(r, string.digits, 12)}:secret:prod/db-Q1w2E3"
    out = json.dumps({"ARN": arn, "Name": "prod/db", "SecretString": inner}, indent=4)
    add("secretsmanager-json-in-json", f"$ aws secretsmanager get-secret-value\n{out}\n", p)
    p = password(r)
    add("secretsmanager-plain", json.dumps({"ARN": arn, "SecretString": p}, indent=4), p)
    p = password(r)
    add(
        "secretsmanager-put",
        f"aws secretsmanager put-secret-value --secret-id db --secret-string '{p}'",
        p,
    )
    p = password(r)
    tf = {
        "db_host": {"sensitive": False, "type": "string", "value": "db.internal"},
        "db_password": {"sensitive": True, "type": "string", "value": p},
    }
    add("terraform-output-json", json.dumps(tf, indent=2), p)
    p = mixed(r, ALNUM, 24)
    tf = {
        "creds": {"sensitive": True, "type": ["object", {"token": "string"}], "value": {"token": p}}
    }
    add("terraform-output-object", json.dumps(tf, indent=2), p)
    p = password(r)
    log = json.dumps({"level": "debug", "body": json.dumps({"user": "a", "api_key": p})})
    add("json-in-json-log", log, p)
    p = mixed(r, ALNUM + "/+", 40)
    add("aws-configure-set-secret", f"aws configure set aws_secret_access_key {p}", p)
    p = "IQoJb3JpZ2luX2Vj" + mixed(r, ALNUM + "/+", 200)
    add("aws-configure-set-session-token", f"aws configure set profile.ci.aws_session_token {p}", p)


def _code(r: random.Random, add: _Add) -> None:
    for prefix in ("b", "r", "u", "f", "rb", "Rb"):
        p = password(r)
        add(f"python-prefix-{prefix}", f"app.secret_key = {prefix}'{p}'\n", p)
    p = password(r)
    add("python-annotated", f'class Config:\n    openai_api_key: str = "{p}"\n', p)
    p = password(r)
    add("typescript-annotated", f'  private readonly apiKey: string = "{p}";', p)
    p = password(r)
    add("pydantic-field-default", f'    api_key: SecretStr = Field(default="{p}", alias="KEY")', p)
    p = password(r)
    add("pydantic-field-multiline", f'    db_password: str = Field(\n        "{p}",\n    )', p)
    p = password(r)
    add("dataclass-field-default", f"    token: str = field(default='{p}')", p)
    p = password(r)
    add("os-environ-subscript", f"os.environ['API_KEY'] = '{p}'", p)
    p = password(r)
    add("dict-subscript", f'config["api_key"] = "{p}"', p)
    p = pick(r, HEX, 40)
    add("headers-subscript", f'headers["Authorization"] = "Token {p}"', p)
    p = password(r)
    add("python-triple-quoted", f'PASSWORD = """{p}"""', p)
    p = password(r)
    add("python-triple-single", f"DB_PASSWORD = '''{p}'''", p)


def _files(r: random.Random, add: _Add) -> None:
    p = password(r)
    add(
        "maven-settings-xml",
        f"<settings>\n  <servers>\n    <server>\n      <id>nexus</id>\n"
        f"      <username>deploy</username>\n      <password>{p}</password>\n"
        "    </server>\n  </servers>\n</settings>\n",
        p,
    )
    p = password(r)
    add(
        "nuget-config",
        '<packageSourceCredentials>\n  <github>\n    <add key="Username" value="ci" />\n'
        f'    <add key="ClearTextPassword" value="{p}" />\n'
        "  </github>\n</packageSourceCredentials>",
        p,
    )
    p = password(r)
    add("dotnet-appsettings", f'<appSettings>\n  <add key="StripeSecretKey" value="{p}"/>', p)
    p = password(r)
    add("php-define", f"define( 'DB_PASSWORD', '{p}' );\ndefine( 'DB_HOST', 'localhost' );", p)
    p = pick(r, _WP_CHARS, 64)
    add("wordpress-auth-key", f"define('AUTH_KEY',         '{p}');", p)
    p = pick(r, _WP_CHARS, 64)
    add("wordpress-nonce-salt", f"define( 'NONCE_SALT', '{p}' );", p)
    p = password(r)
    add("pgpass", f"$ cat ~/.pgpass\ndb.internal:5432:shop:app:{p}\n*:*:*:postgres:x\n", p)
    p = password(r)
    add("dockerfile-env", f"FROM node:22-alpine\nENV NODE_ENV production\nENV API_TOKEN {p}\n", p)


def _flags(r: random.Random, add: _Add) -> None:
    host = f"db-{pick(r, string.ascii_lowercase, 5)}.internal"
    p = password(r)
    add("redis-cli-a", f"$ redis-cli -h cache -p 6379 -a '{p}' --no-auth-warning ping\nPONG", p)
    p = password(r)
    add("sqlcmd-P", f'sqlcmd -S {host} -U sa -P "{p}" -Q "SELECT 1"', p)
    p = password(r)
    add("htpasswd-b", f"htpasswd -bc /etc/nginx/.htpasswd admin '{p}'", p)
    p = password(r)
    add("htpasswd-nb", f"htpasswd -nbB admin {p} >> .htpasswd", p)
    p = password(r)
    add("openssl-k", f"openssl enc -aes-256-cbc -salt -in dump.sql -out dump.enc -k '{p}'", p)
    p = password(r)
    add("openssl-pass", f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{p}", p)
    p = password(r)
    add("mysqladmin-p", f"mysqladmin -u root -p{p} -h {host} status", p)
    p = password(r)
    add(
        "docker-exec-mysql-p", f"docker compose exec db mysql -uroot -p'{p}' -e 'show databases'", p
    )


class _Add:
    """Collects (format, text, secret) triples."""

    def __init__(self) -> None:
        self.cases: list[tuple[str, str, str]] = []

    def __call__(self, fmt: str, text: str, secret: str) -> None:
        assert secret in text, fmt
        self.cases.append((fmt, text, secret))


FAMILIES: dict[str, Callable[[random.Random, _Add], None]] = {
    "cloud CLIs: Secrets Manager (JSON in a JSON string), Terraform, `aws configure set`": _cloud,
    "code: `b''`/`r''`/`f''`, annotations, `Field(default=)`, subscripts, triple quotes": _code,
    "config files: Maven XML, NuGet, PHP `define`, WordPress, `.pgpass`, Dockerfile `ENV`": _files,
    "password flags: `redis-cli -a`, `sqlcmd -P`, `htpasswd -b`, `openssl -k`, `mysql -p`": _flags,
}
"""The issue-22 families, each a generator of its formats."""


def family_cases(rng: random.Random, family: str) -> list[tuple[str, str, str]]:
    """One family's cases as (format, text, secret), values fresh from `rng`."""
    add = _Add()
    FAMILIES[family](rng, add)
    return add.cases


def format_cases(rng: random.Random) -> list[tuple[str, str, str]]:
    """Every issue-22 case as (format, text, secret), values fresh from `rng`."""
    return [case for family in FAMILIES for case in family_cases(rng, family)]
