"""Secrets where developers really print them, with values made at random on every run.

`secret_cases(rng)` gives (format, text, secret) triples; tests/support/ordinary_corpus.py
has the developer text that must survive. Formats follow public secret-scanning rulesets;
no value is real.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable

import msgspec

from tests.support.random_values import (
    ALNUM,
    B64URL,
    BECH32,
    HEX,
    b64,
    jwt,
    mixed,
    password,
    pem,
    pick,
)
from tests.support.secret_formats import format_cases


class SecretCase(msgspec.Struct, frozen=True):
    """A text holding one secret, and where it came from."""

    format: str
    text: str
    secret: str


TOKENS: dict[str, tuple[str, Callable[[random.Random], str]]] = {
    "anthropic": ("ANTHROPIC_API_KEY", lambda r: f"sk-ant-api03-{mixed(r, B64URL, 93)}AA"),
    "openai": ("OPENAI_API_KEY", lambda r: f"sk-proj-{mixed(r, B64URL, 48)}"),
    "github-classic": ("GITHUB_TOKEN", lambda r: f"ghp_{mixed(r, ALNUM, 36)}"),
    "github-oauth": ("GH_TOKEN", lambda r: f"gho_{mixed(r, ALNUM, 36)}"),
    "github-fine-grained": (
        "GH_PAT",
        lambda r: f"github_pat_11{mixed(r, ALNUM, 20)}_{mixed(r, ALNUM, 59)}",
    ),
    "gitlab": ("GITLAB_PAT", lambda r: f"glpat-{mixed(r, B64URL, 20)}"),
    "aws-access-key": (
        "AWS_ACCESS_KEY_ID",
        lambda r: "AKIA" + pick(r, "ABCDEFGHJKLMNPQRSTUVWXYZ234567", 16),
    ),
    "slack-bot": (
        "SLACK_BOT_TOKEN",
        lambda r: (
            f"xoxb-{pick(r, string.digits, 12)}-{pick(r, string.digits, 13)}-{mixed(r, ALNUM, 24)}"
        ),
    ),
    "slack-app": (
        "SLACK_APP_TOKEN",
        lambda r: (
            f"xapp-1-A{pick(r, string.ascii_uppercase + string.digits, 10)}"
            f"-{pick(r, string.digits, 13)}-{pick(r, HEX, 64)}"
        ),
    ),
    "stripe-live": ("STRIPE_SECRET_KEY", lambda r: f"sk_live_{mixed(r, ALNUM, 99)}"),
    "stripe-restricted": ("STRIPE_RK", lambda r: f"rk_test_{mixed(r, ALNUM, 24)}"),
    "stripe-webhook": ("STRIPE_WEBHOOK_SECRET", lambda r: f"whsec_{mixed(r, ALNUM, 32)}"),
    "google-api-key": ("GOOGLE_API_KEY", lambda r: f"AIza{mixed(r, B64URL, 35)}"),
    "gcloud-access-token": ("GCLOUD_ACCESS", lambda r: f"ya29.a0{mixed(r, B64URL, 150)}"),
    "npm": ("NPM_TOKEN", lambda r: f"npm_{mixed(r, ALNUM, 36)}"),
    "pypi": ("TWINE_PASSWORD", lambda r: f"pypi-AgEIcHlwaS5vcmc{mixed(r, B64URL, 120)}"),
    "huggingface": ("HF_TOKEN", lambda r: f"hf_{mixed(r, string.ascii_letters, 34)}"),
    "sendgrid": ("SENDGRID", lambda r: f"SG.{mixed(r, B64URL, 22)}.{mixed(r, B64URL, 43)}"),
    "vault": ("VAULT_TOKEN", lambda r: f"hvs.{mixed(r, B64URL, 91)}"),
    "digitalocean": ("DIGITALOCEAN_ACCESS", lambda r: f"dop_v1_{pick(r, HEX, 64)}"),
    "shopify": ("SHOPIFY_ADMIN", lambda r: f"shpat_{pick(r, HEX, 32)}"),
    "databricks": ("DATABRICKS_HOST_CRED", lambda r: f"dapi{pick(r, HEX, 32)}"),
    "age": ("SOPS_AGE", lambda r: f"AGE-SECRET-KEY-1{pick(r, BECH32, 58)}"),
    "telegram-bot": (
        "TELEGRAM_BOT",
        lambda r: f"{r.randint(10**8, 10**10 - 1)}:AA{mixed(r, B64URL, 33)}",
    ),
    "azure-ad-client-secret": (
        "AZURE_CLIENT_CRED",
        lambda r: f"{mixed(r, ALNUM, 3)}{r.randint(0, 9)}Q~{mixed(r, ALNUM + '_~.-', 34)}",
    ),
    "jwt": ("ID_JWT", jwt),
    "mailgun": ("MAILGUN_KEY", lambda r: f"key-{pick(r, HEX, 32)}"),
    "twilio-api-key": ("TWILIO_API_KEY_SID", lambda r: f"SK{pick(r, HEX, 32)}"),
}

# Where a developer prints a token: (context, how the text is made from a name and value).
CONTEXTS: dict[str, Callable[[str, str], str]] = {
    "dotenv": lambda n, s: f"$ cat .env\nDEBUG=1\n{n}={s}\nLOG_LEVEL=info\n",
    "export": lambda n, s: f'export {n}="{s}"',
    "json-config": lambda n, s: json.dumps({"service": "api", n.lower(): s}, indent=2),
    "yaml-ci": lambda n, s: f"jobs:\n  deploy:\n    env:\n      {n}: '{s}'\n",
    "log-line": lambda n, s: f"2025-03-01T10:00:00Z DEBUG client configured with {s} (retry=3)",
    "env-dump": lambda n, s: f"HOME=/home/dev\nPATH=/usr/bin:/bin\n{n}={s}\nSHELL=/bin/zsh",
}


def _token_cases(rng: random.Random) -> list[SecretCase]:
    cases = []
    for i, (fmt, (name, make)) in enumerate(TOKENS.items()):
        contexts = list(CONTEXTS.items())
        for k in range(3):  # three contexts per format, rotating
            context, render = contexts[(i + k * 2) % len(contexts)]
            value = make(rng)
            cases.append(SecretCase(f"{fmt}/{context}", render(name, value), value))
        # And bare, in a context that names nothing.
        value = make(rng)
        cases.append(SecretCase(f"{fmt}/bare", f"got {value} from the vault", value))
    return cases


def _shape_cases(r: random.Random) -> list[SecretCase]:
    cases: list[SecretCase] = []

    def add(fmt: str, text: str, secret: str) -> None:
        cases.append(SecretCase(fmt, text, secret))

    pw = lambda: password(r)  # noqa: E731
    host = f"db-{pick(r, string.ascii_lowercase, 5)}.internal"
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"):
        key = pem(r, label)
        add(f"pem/{label}", f"$ cat ~/.ssh/id\n{key}\n", key.splitlines()[2])
    p = pw()
    add("pgpassword", f"PGPASSWORD={p} psql -h {host} -U app app", p)
    p = pw()
    add("rediscli-auth", f"REDISCLI_AUTH={p} redis-cli -h cache ping", p)
    p = mixed(r, ALNUM, 40)
    add("ngrok-authtoken", f"version: 2\nauthtoken: {p}\ntunnels: {{}}\n", p)
    p = pw()
    add("one-word-accesstoken", f"accesstoken={p}", p)
    p = pw()
    add("numbered-name", f"API_KEY_2={p}\nAPI_KEY_3=", p)
    p = pw()
    add("toml", f'[database]\nuser = "app"\npassword = "{p}"\n', p)
    p = pw()
    add("ini", f"[client]\nuser=root\npassword={p}\n", p)
    p = pw()
    add("json-list", json.dumps({"users": {"password": [p, "old"]}}), p)
    p = pw()
    add("yaml-nested", f"spring:\n  datasource:\n    db_password: {p}\n", p)
    p = pw()
    add("mysql-p", f"$ mysql -u root -p{p} -h {host} shop", p)
    p = pw()
    add("mysqldump-p", f"mysqldump -uroot -p'{p}' shop > dump.sql", p)
    p = pw()
    add("curl-u", f"curl -u deploy:{p} https://ci.example.com/api/json", p)
    p = pw()
    add("curl-user", f'curl --user "admin:{p}" -X POST https://jenkins.local/job/x/build', p)
    p = pw()
    add("docker-login-p", f"docker login -u bot -p {p} registry.example.com", p)
    p = TOKENS["pypi"][1](r)
    add("twine-p", f"twine upload -u __token__ -p {p} dist/*", p)
    p = mixed(r, ALNUM, 30)
    add("uv-publish-token", f"uv publish --token {p}", p)
    p = TOKENS["huggingface"][1](r)
    add("hf-cli-login", f"huggingface-cli login --token {p} --add-to-git-credential", p)
    p = f"s.{mixed(r, ALNUM, 24)}"  # a legacy Vault token
    add("vault-login", f"vault login {p}", p)
    p = pick(r, HEX, 64)
    add("doctl-auth-init", f"doctl auth init -t {p}", p)
    p = pw()
    add("flag-password-eq", f"./manage.py createsuperuser --password={p} --noinput", p)
    p = mixed(r, ALNUM, 32)
    add("flag-api-key", f"mycli deploy --api-key {p} --region eu", p)
    p = mixed(r, ALNUM, 32)
    add("flag-token", f"terraform login --token '{p}'", p)
    p = pw()
    add("sshpass", f"sshpass -p '{p}' ssh deploy@{host}", p)
    p = pw()
    add("netrc", f"machine api.heroku.com\n  login me@example.com\n  password {p}\n", p)
    p = pw()
    add("netrc-one-line", f"machine git.example.com login ci password {p}", p)
    p = pw()
    auth = b64(f"bot:{p}")
    add("docker-config-auth", json.dumps({"auths": {"ghcr.io": {"auth": auth}}}, indent=2), auth)
    key = b64(pem(r, "RSA PRIVATE KEY"))
    add(
        "kubeconfig-client-key-data",
        f"users:\n- name: admin\n  user:\n    client-certificate-data: LS0tQ0VSVA==\n"
        f"    client-key-data: {key}\n",
        key,
    )
    p = mixed(r, ALNUM, 24)
    add(
        "k8s-secret-yaml",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
        f"  username: YXBw\n  dbconn: {b64(p)}\n",
        b64(p),
    )
    p = mixed(r, ALNUM, 24)
    add(
        "k8s-secret-json",
        json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"conn": b64(p)}}, indent=2),
        b64(p),
    )
    p = pick(r, HEX, 40)
    add("authorization-token", f"curl -H 'Authorization: Token {p}' https://api.example.com", p)
    p = mixed(r, ALNUM, 32)
    add("cookie-header", f"Cookie: sessionid={p}; csrftoken=abc", p)
    p = mixed(r, ALNUM, 32)
    add("set-cookie", f"< Set-Cookie: sessionid={p}; Path=/; HttpOnly", p)
    p = mixed(r, ALNUM, 32)
    add("curl-cookie", f"curl -b 'sessionid={p}' https://app.example.com/me", p)
    p = pick(r, HEX, 32)
    add("sentry-dsn", f"SENTRY_DSN=https://{p}@o4505.ingest.sentry.io/4505", p)
    p = pick(r, HEX, 32)
    add("sentry-dsn-code", f'sentry_sdk.init(dsn="https://{p}@o1.ingest.sentry.io/2")', p)
    p = TOKENS["pypi"][1](r)
    add("pypirc", f"[pypi]\n  username = __token__\n  password = {p}\n", p)
    for sep in "#/?@":
        p = f"{mixed(r, ALNUM, 5)}{sep}{mixed(r, ALNUM, 6)}!"
        add(f"url-password-{sep}", f"DATABASE_URL=postgresql://app:{p}@{host}:5432/app", p)
    p = pw()
    add("mongodb-srv", f"mongodb+srv://admin:{p}@cluster0.abcd.mongodb.net/test", p)
    p = pw()
    add("redis-url", f"redis-cli -u redis://default:{p}@cache:6379/0", p)
    p = f"p@ss&word{r.randint(100, 999)}"
    add("ampersand-password", f"PASSWORD={p}", p)
    p = f"${mixed(r, string.ascii_letters, 9)}{r.randint(10, 99)}"
    add("dollar-password", f"DB_PASSWORD={p}", p)
    p = f"your{mixed(r, string.ascii_letters, 3).title()}-Rocks-{r.randint(1950, 2010)}"
    add("your-password", f"password: {p}", p)
    p = f"Sample-Pa{r.randint(10, 99)}word!"
    add("sample-password", f'"password": "{p}"', p)
    p = "{" + password(r) + "}"
    add("brace-password", f"SMTP_PASSWORD={p}", p)
    p = b64(pick(r, ALNUM, 64))
    add(
        "azure-storage",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={p};EndpointSuffix=core.windows.net",
        p,
    )
    p = mixed(r, ALNUM + "%", 44) + "%3D"
    add(
        "azure-sas",
        f"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2025&sr=b&sp=r&sig={p}",
        p,
    )
    p = TOKENS["telegram-bot"][1](r)
    add("telegram-url", f"curl https://api.telegram.org/bot{p}/getUpdates", p)
    p = TOKENS["gitlab"][1](r)
    add("gitlab-remote", f"origin  https://oauth2:{p}@gitlab.com/acme/app.git (fetch)", p)
    p = TOKENS["github-classic"][1](r)
    add("github-remote", f"origin\thttps://{p}@github.com/acme/app.git (push)", p)
    p = TOKENS["github-oauth"][1](r)
    add(
        "gh-auth-status",
        f"github.com\n  ✓ Logged in to github.com account dev (keyring)\n  - Token: {p}\n",
        p,
    )
    p = jwt(r)
    add("kubectl-config-view", f"users:\n- name: sa\n  user:\n    token: {p}\n", p)
    p = pw()
    add("docker-compose-env", f"    environment:\n      - POSTGRES_PASSWORD={p}\n", p)
    p = mixed(r, ALNUM, 40)
    add(
        "aws-credentials",
        f"[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {p}\n",
        p,
    )
    p = mixed(r, ALNUM, 24)
    add("bearer", f"Authorization: Bearer {p}", p)
    p = pw()
    add("python-kwarg", f'conn = psycopg.connect(host="db", password="{p}")', p)
    p = pw()
    add("gitlab-ci-variable", f'variables:\n  CI_REGISTRY_PASSWORD: "{p}"\n', p)
    return cases


def secret_cases(rng: random.Random) -> list[SecretCase]:
    """Every case of the corpus, values fresh from `rng`."""
    formats = [SecretCase(*case) for case in format_cases(rng)]
    return _token_cases(rng) + _shape_cases(rng) + formats
