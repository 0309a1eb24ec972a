"""Secrets where developers really print them, with values made at random on every run.

`secret_cases(rng)` gives (format, text, secret) triples; `ordinary_texts(rng)` gives
developer text full of secret-like noise (SHAs, UUIDs, digests) that must survive.
Formats follow public secret-scanning rulesets; no value is real.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

import msgspec

_ALNUM = string.ascii_letters + string.digits
_B64URL = _ALNUM + "_-"
_HEX = "0123456789abcdef"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
_PUNCT = "!#%@/?^*~+=.-_"


class SecretCase(msgspec.Struct, frozen=True):
    """A text holding one secret, and where it came from."""

    format: str
    text: str
    secret: str


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, alphabet: str, n: int) -> str:
    # Upper, lower and a digit, as every real random token of this length has.
    while True:
        value = _pick(rng, alphabet, n)
        digit = any(c.isdigit() for c in value) or not any(c.isdigit() for c in alphabet)
        if digit and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


def password(rng: random.Random) -> str:
    """A password as people make them: letters, digits and shell-awkward punctuation."""
    core = _mixed(rng, _ALNUM, rng.randint(8, 14))
    spots = rng.sample(range(1, len(core)), 2)
    chars = list(core)
    for spot in spots:
        chars[spot] = rng.choice(_PUNCT)
    # It starts with a letter: `host:8080/path@v2` is a port and a path, so a URL password
    # of digits then `/` is kept (see pipeline.redaction.patterns).
    return rng.choice(string.ascii_letters) + "".join(chars) + rng.choice(string.digits)


def _pem(rng: random.Random, label: str) -> str:
    lines = [_pick(rng, _ALNUM + "+/", 64) for _ in range(rng.randint(4, 9))]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def _jwt(rng: random.Random) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').decode().rstrip("=")
    claims = json.dumps({"sub": _pick(rng, _HEX, 12), "exp": rng.randint(10**9, 2 * 10**9)})
    body = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    return f"{head}.{body}.{_mixed(rng, _B64URL, 86)}"


# A vendor token's name as an env variable, and how to make one.
TOKENS: dict[str, tuple[str, Callable[[random.Random], str]]] = {
    "anthropic": ("ANTHROPIC_API_KEY", lambda r: f"sk-ant-api03-{_mixed(r, _B64URL, 93)}AA"),
    "openai": ("OPENAI_API_KEY", lambda r: f"sk-proj-{_mixed(r, _B64URL, 48)}"),
    "github-classic": ("GITHUB_TOKEN", lambda r: f"ghp_{_mixed(r, _ALNUM, 36)}"),
    "github-oauth": ("GH_TOKEN", lambda r: f"gho_{_mixed(r, _ALNUM, 36)}"),
    "github-fine-grained": (
        "GH_PAT",
        lambda r: f"github_pat_11{_mixed(r, _ALNUM, 20)}_{_mixed(r, _ALNUM, 59)}",
    ),
    "gitlab": ("GITLAB_PAT", lambda r: f"glpat-{_mixed(r, _B64URL, 20)}"),
    "aws-access-key": (
        "AWS_ACCESS_KEY_ID",
        lambda r: "AKIA" + _pick(r, "ABCDEFGHJKLMNPQRSTUVWXYZ234567", 16),
    ),
    "slack-bot": (
        "SLACK_BOT_TOKEN",
        lambda r: (
            f"xoxb-{_pick(r, string.digits, 12)}-{_pick(r, string.digits, 13)}"
            f"-{_mixed(r, _ALNUM, 24)}"
        ),
    ),
    "slack-app": (
        "SLACK_APP_TOKEN",
        lambda r: (
            f"xapp-1-A{_pick(r, string.ascii_uppercase + string.digits, 10)}"
            f"-{_pick(r, string.digits, 13)}-{_pick(r, _HEX, 64)}"
        ),
    ),
    "stripe-live": ("STRIPE_SECRET_KEY", lambda r: f"sk_live_{_mixed(r, _ALNUM, 99)}"),
    "stripe-restricted": ("STRIPE_RK", lambda r: f"rk_test_{_mixed(r, _ALNUM, 24)}"),
    "stripe-webhook": ("STRIPE_WEBHOOK_SECRET", lambda r: f"whsec_{_mixed(r, _ALNUM, 32)}"),
    "google-api-key": ("GOOGLE_API_KEY", lambda r: f"AIza{_mixed(r, _B64URL, 35)}"),
    "gcloud-access-token": ("GCLOUD_ACCESS", lambda r: f"ya29.a0{_mixed(r, _B64URL, 150)}"),
    "npm": ("NPM_TOKEN", lambda r: f"npm_{_mixed(r, _ALNUM, 36)}"),
    "pypi": ("TWINE_PASSWORD", lambda r: f"pypi-AgEIcHlwaS5vcmc{_mixed(r, _B64URL, 120)}"),
    "huggingface": ("HF_TOKEN", lambda r: f"hf_{_mixed(r, string.ascii_letters, 34)}"),
    "sendgrid": ("SENDGRID", lambda r: f"SG.{_mixed(r, _B64URL, 22)}.{_mixed(r, _B64URL, 43)}"),
    "vault": ("VAULT_TOKEN", lambda r: f"hvs.{_mixed(r, _B64URL, 91)}"),
    "digitalocean": ("DIGITALOCEAN_ACCESS", lambda r: f"dop_v1_{_pick(r, _HEX, 64)}"),
    "shopify": ("SHOPIFY_ADMIN", lambda r: f"shpat_{_pick(r, _HEX, 32)}"),
    "databricks": ("DATABRICKS_HOST_CRED", lambda r: f"dapi{_pick(r, _HEX, 32)}"),
    "age": ("SOPS_AGE", lambda r: f"AGE-SECRET-KEY-1{_pick(r, _BECH32, 58)}"),
    "telegram-bot": (
        "TELEGRAM_BOT",
        lambda r: f"{r.randint(10**8, 10**10 - 1)}:AA{_mixed(r, _B64URL, 33)}",
    ),
    "azure-ad-client-secret": (
        "AZURE_CLIENT_CRED",
        lambda r: f"{_mixed(r, _ALNUM, 3)}{r.randint(0, 9)}Q~{_mixed(r, _ALNUM + '_~.-', 34)}",
    ),
    "jwt": ("ID_JWT", _jwt),
    "mailgun": ("MAILGUN_KEY", lambda r: f"key-{_pick(r, _HEX, 32)}"),
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


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _shape_cases(r: random.Random) -> list[SecretCase]:
    cases: list[SecretCase] = []

    def add(fmt: str, text: str, secret: str) -> None:
        cases.append(SecretCase(fmt, text, secret))

    pw = lambda: password(r)  # noqa: E731
    host = f"db-{_pick(r, string.ascii_lowercase, 5)}.internal"
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"):
        key = _pem(r, label)
        add(f"pem/{label}", f"$ cat ~/.ssh/id\n{key}\n", key.splitlines()[2])
    p = pw()
    add("pgpassword", f"PGPASSWORD={p} psql -h {host} -U app app", p)
    p = pw()
    add("rediscli-auth", f"REDISCLI_AUTH={p} redis-cli -h cache ping", p)
    p = _mixed(r, _ALNUM, 40)
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
    p = _mixed(r, _ALNUM, 30)
    add("uv-publish-token", f"uv publish --token {p}", p)
    p = TOKENS["huggingface"][1](r)
    add("hf-cli-login", f"huggingface-cli login --token {p} --add-to-git-credential", p)
    p = f"s.{_mixed(r, _ALNUM, 24)}"  # a legacy Vault token
    add("vault-login", f"vault login {p}", p)
    p = _pick(r, _HEX, 64)
    add("doctl-auth-init", f"doctl auth init -t {p}", p)
    p = pw()
    add("flag-password-eq", f"./manage.py createsuperuser --password={p} --noinput", p)
    p = _mixed(r, _ALNUM, 32)
    add("flag-api-key", f"mycli deploy --api-key {p} --region eu", p)
    p = _mixed(r, _ALNUM, 32)
    add("flag-token", f"terraform login --token '{p}'", p)
    p = pw()
    add("sshpass", f"sshpass -p '{p}' ssh deploy@{host}", p)
    p = pw()
    add("netrc", f"machine api.heroku.com\n  login me@example.com\n  password {p}\n", p)
    p = pw()
    add("netrc-one-line", f"machine git.example.com login ci password {p}", p)
    p = pw()
    auth = _b64(f"bot:{p}")
    add("docker-config-auth", json.dumps({"auths": {"ghcr.io": {"auth": auth}}}, indent=2), auth)
    key = _b64(_pem(r, "RSA PRIVATE KEY"))
    add(
        "kubeconfig-client-key-data",
        f"users:\n- name: admin\n  user:\n    client-certificate-data: LS0tQ0VSVA==\n"
        f"    client-key-data: {key}\n",
        key,
    )
    p = _mixed(r, _ALNUM, 24)
    add(
        "k8s-secret-yaml",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
        f"  username: YXBw\n  dbconn: {_b64(p)}\n",
        _b64(p),
    )
    p = _mixed(r, _ALNUM, 24)
    add(
        "k8s-secret-json",
        json.dumps({"apiVersion": "v1", "kind": "Secret", "data": {"conn": _b64(p)}}, indent=2),
        _b64(p),
    )
    p = _pick(r, _HEX, 40)
    add("authorization-token", f"curl -H 'Authorization: Token {p}' https://api.example.com", p)
    p = _mixed(r, _ALNUM, 32)
    add("cookie-header", f"Cookie: sessionid={p}; csrftoken=abc", p)
    p = _mixed(r, _ALNUM, 32)
    add("set-cookie", f"< Set-Cookie: sessionid={p}; Path=/; HttpOnly", p)
    p = _mixed(r, _ALNUM, 32)
    add("curl-cookie", f"curl -b 'sessionid={p}' https://app.example.com/me", p)
    p = _pick(r, _HEX, 32)
    add("sentry-dsn", f"SENTRY_DSN=https://{p}@o4505.ingest.sentry.io/4505", p)
    p = _pick(r, _HEX, 32)
    add("sentry-dsn-code", f'sentry_sdk.init(dsn="https://{p}@o1.ingest.sentry.io/2")', p)
    p = TOKENS["pypi"][1](r)
    add("pypirc", f"[pypi]\n  username = __token__\n  password = {p}\n", p)
    for sep in "#/?@":
        p = f"{_mixed(r, _ALNUM, 5)}{sep}{_mixed(r, _ALNUM, 6)}!"
        add(f"url-password-{sep}", f"DATABASE_URL=postgresql://app:{p}@{host}:5432/app", p)
    p = pw()
    add("mongodb-srv", f"mongodb+srv://admin:{p}@cluster0.abcd.mongodb.net/test", p)
    p = pw()
    add("redis-url", f"redis-cli -u redis://default:{p}@cache:6379/0", p)
    p = f"p@ss&word{r.randint(100, 999)}"
    add("ampersand-password", f"PASSWORD={p}", p)
    p = f"${_mixed(r, string.ascii_letters, 9)}{r.randint(10, 99)}"
    add("dollar-password", f"DB_PASSWORD={p}", p)
    p = f"your{_mixed(r, string.ascii_letters, 3).title()}-Rocks-{r.randint(1950, 2010)}"
    add("your-password", f"password: {p}", p)
    p = f"Sample-Pa{r.randint(10, 99)}word!"
    add("sample-password", f'"password": "{p}"', p)
    p = "{" + password(r) + "}"
    add("brace-password", f"SMTP_PASSWORD={p}", p)
    p = _b64(_pick(r, _ALNUM, 64))
    add(
        "azure-storage",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={p};EndpointSuffix=core.windows.net",
        p,
    )
    p = _mixed(r, _ALNUM + "%", 44) + "%3D"
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
    p = _jwt(r)
    add("kubectl-config-view", f"users:\n- name: sa\n  user:\n    token: {p}\n", p)
    p = pw()
    add("docker-compose-env", f"    environment:\n      - POSTGRES_PASSWORD={p}\n", p)
    p = _mixed(r, _ALNUM, 40)
    add(
        "aws-credentials",
        f"[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {p}\n",
        p,
    )
    p = _mixed(r, _ALNUM, 24)
    add("bearer", f"Authorization: Bearer {p}", p)
    p = pw()
    add("python-kwarg", f'conn = psycopg.connect(host="db", password="{p}")', p)
    p = pw()
    add("gitlab-ci-variable", f'variables:\n  CI_REGISTRY_PASSWORD: "{p}"\n', p)
    return cases


def secret_cases(rng: random.Random) -> list[SecretCase]:
    """Every case of the corpus, values fresh from `rng`."""
    return _token_cases(rng) + _shape_cases(rng)


def _uuid(r: random.Random) -> str:
    h = _pick(r, _HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def ordinary_texts(r: random.Random) -> list[str]:
    """Developer text with no secret in it, dense with hashes, ids and secret-ish words."""
    sha = lambda: _pick(r, _HEX, 40)  # noqa: E731
    texts = [
        "\n".join(f"{sha()[:7]} Fix flaky test in cart ({r.randint(1, 999)})" for _ in range(30)),
        "\n".join(
            f"commit {sha()}\nAuthor: Dev <dev@example.com>\n\n    Bump deps\n" for _ in range(8)
        ),
        "\n".join(f"{_pick(r, _HEX, 64)}  dist/app-{i}.tar.gz" for i in range(20)),
        "\n".join(f"{_uuid(r)}  session started for user {r.randint(1, 10**6)}" for _ in range(30)),
        "\n".join(
            f"docker.io/library/app@sha256:{_pick(r, _HEX, 64)}\n"
            f"Digest: sha256:{_pick(r, _HEX, 64)}"
            for _ in range(10)
        ),
        json.dumps(
            {
                f"node_modules/pkg-{i}": {
                    "version": f"1.{i}.0",
                    "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz",
                    "integrity": "sha512-" + _b64(_pick(r, _ALNUM, 64)),
                }
                for i in range(15)
            },
            indent=2,
        ),
        "\n".join(f"    --hash=sha256:{_pick(r, _HEX, 64)} \\" for _ in range(15)),
        '<img src="data:image/png;base64,' + _b64(_pick(r, _ALNUM, 600)) + '" alt="logo">',
        "class PasswordPolicy:\n    min_length = 12\n    password_policy = 'strict'\n"
        "    api_key_header = APIKeyHeader(name='X-API-Key')\n"
        "    def check(self, password: str) -> bool:\n        return len(password) >= 12\n"
        "    token_type = 'bearer'\n    max_tokens = 4096\n    primary_key = 'id'\n",
        "\n".join(
            f"tests/test_auth.py::test_login_{i} PASSED [{i}%]  token_count={r.randint(1, 99)}"
            for i in range(30)
        ),
        "\n".join(
            f"github.com/acme/lib{i} v1.{i}.0 h1:{_b64(_pick(r, _ALNUM, 32))}" for i in range(10)
        ),
        "export PATH=$HOME/.local/bin:$PATH\nexport EDITOR=vim\nPASSWORD_MIN_LENGTH=12\n"
        "SESSION_COOKIE_SECURE=true\nAUTH_BACKEND=ldap\nTOKEN_TTL=3600\n",
        "\n".join(f"  {sha()[:12]}  {r.randint(1, 900)} MB  postgres:16-alpine" for _ in range(10)),
        'Traceback (most recent call last):\n  File "app/auth.py", line 42, in login\n'
        "    user = authenticate(username=form.username, password=form.password)\n"
        "KeyError: 'password'\n",
        "\n".join(f"remote: Resolving deltas: {i}% ({i}/{100}) {sha()}" for i in range(0, 100, 5)),
    ]
    return texts
