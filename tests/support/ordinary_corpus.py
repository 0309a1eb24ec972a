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
    ]
    return texts
