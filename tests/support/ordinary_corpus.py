"""Ordinary developer text, dense with secret-like noise, that redaction must leave alone."""

from __future__ import annotations

import json
import random

from tests.support.secret_corpus import ALNUM, HEX, b64, pick


def _uuid(r: random.Random) -> str:
    h = pick(r, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def ordinary_texts(r: random.Random) -> list[str]:
    """Developer text with no secret in it, dense with hashes, ids and secret-ish words."""
    sha = lambda: pick(r, HEX, 40)  # noqa: E731
    texts = [
        "\n".join(f"{sha()[:7]} Fix flaky test in cart ({r.randint(1, 999)})" for _ in range(30)),
        "\n".join(
            f"commit {sha()}\nAuthor: Dev <dev@example.com>\n\n    Bump deps\n" for _ in range(8)
        ),
        "\n".join(f"{pick(r, HEX, 64)}  dist/app-{i}.tar.gz" for i in range(20)),
        "\n".join(f"{_uuid(r)}  session started for user {r.randint(1, 10**6)}" for _ in range(30)),
        "\n".join(
            f"docker.io/library/app@sha256:{pick(r, HEX, 64)}\nDigest: sha256:{pick(r, HEX, 64)}"
            for _ in range(10)
        ),
        json.dumps(
            {
                f"node_modules/pkg-{i}": {
                    "version": f"1.{i}.0",
                    "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz",
                    "integrity": "sha512-" + b64(pick(r, ALNUM, 64)),
                }
                for i in range(15)
            },
            indent=2,
        ),
        "\n".join(f"    --hash=sha256:{pick(r, HEX, 64)} \\" for _ in range(15)),
        '<img src="data:image/png;base64,' + b64(pick(r, ALNUM, 600)) + '" alt="logo">',
        "class PasswordPolicy:\n    min_length = 12\n    password_policy = 'strict'\n"
        "    api_key_header = APIKeyHeader(name='X-API-Key')\n"
        "    def check(self, password: str) -> bool:\n        return len(password) >= 12\n"
        "    token_type = 'bearer'\n    max_tokens = 4096\n    primary_key = 'id'\n",
        "\n".join(
            f"tests/test_auth.py::test_login_{i} PASSED [{i}%]  token_count={r.randint(1, 99)}"
            for i in range(30)
        ),
        "\n".join(
            f"github.com/acme/lib{i} v1.{i}.0 h1:{b64(pick(r, ALNUM, 32))}" for i in range(10)
        ),
        "export PATH=$HOME/.local/bin:$PATH\nexport EDITOR=vim\nPASSWORD_MIN_LENGTH=12\n"
        "SESSION_COOKIE_SECURE=true\nAUTH_BACKEND=ldap\nTOKEN_TTL=3600\n",
        "\n".join(f"  {sha()[:12]}  {r.randint(1, 900)} MB  postgres:16-alpine" for _ in range(10)),
        'Traceback (most recent call last):\n  File "app/auth.py", line 42, in login\n'
        "    user = authenticate(username=form.username, password=form.password)\n"
        "KeyError: 'password'\n",
        "\n".join(f"remote: Resolving deltas: {i}% ({i}/{100}) {sha()}" for i in range(0, 100, 5)),
        *_issue22_texts(r),
    ]
    return texts


def _issue22_texts(r: random.Random) -> list[str]:
    """Look-alikes of the issue-22 families: nsswitch, ARNs, annotations, configs, flags."""
    account = pick(r, "0123456789", 12)
    arns = [
        f"arn:aws:secretsmanager:eu-west-1:{account}:secret:prod/{name}-{pick(r, ALNUM, 6)}"
        for name in ("db", "api", "stripe", "smtp")
    ]
    return [
        "# /etc/nsswitch.conf\npasswd:         files systemd\ngroup:          files systemd\n"
        "shadow:         files\ngshadow:        files\nhosts:          files mymachines dns\n"
        "networks:       files\nprotocols:      db files\nservices:       db files\n",
        json.dumps(
            {
                "SecretList": [
                    {"ARN": arn, "Name": arn.rsplit(":", 1)[1][:-7], "LastChangedDate": 1.7e9}
                    for arn in arns
                ]
            },
            indent=4,
        ),
        json.dumps(
            {
                "lb_address": {"sensitive": False, "type": "string", "value": "lb.example.com"},
                "db_port": {"sensitive": False, "type": "number", "value": 5432},
            },
            indent=2,
        ),
        "class Settings(BaseSettings):\n    api_key: SecretStr\n"
        "    token: str | None = None\n    password: str = Field(..., min_length=12)\n"
        "    db_password: Optional[str] = Field(default=None)\n\n"
        "def login(username: str, password: str) -> Token:\n"
        "    os.environ['API_KEY'] = api_key\n    headers['Authorization'] = f'Bearer {token}'\n"
        "    config['api_key'] = settings.api_key\n    return Token(password=password)\n",
        "FROM python:3.12-slim\nENV PYTHONUNBUFFERED 1\nENV PATH /app/.venv/bin:$PATH\n"
        "ENV API_TOKEN ${API_TOKEN}\nARG VERSION=1.4.2\nCOPY . /app\nRUN pip install -e .\n",
        "<settings>\n  <servers>\n    <server>\n      <id>nexus</id>\n"
        "      <username>${env.NEXUS_USER}</username>\n"
        "      <password>${env.NEXUS_PASS}</password>\n"
        "      <privateKey>${user.home}/.ssh/id_rsa</privateKey>\n    </server>\n  </servers>\n",
        "define( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\n"
        "define( 'DB_PASSWORD', getenv('DB_PASSWORD') );\ndefine( 'WP_DEBUG', false );\n",
        "redis-cli -h cache -p 6379 ping\nredis-cli --askpass -h cache info\n"
        "sqlcmd -S db.internal -E -Q 'SELECT @@VERSION'\nhtpasswd -c /etc/nginx/.htpasswd admin\n"
        "openssl req -new -key server.key -out server.csr -subj /CN=example.com\n"
        "openssl enc -d -aes-256-cbc -in dump.enc -out dump.sql -pass env:BACKUP_PASS\n"
        "mysql -u root -p shop < dump.sql\naws configure set region eu-west-1\n",
        "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        "sudo:x:27:dev\n10:00:00 started\n",
    ]
