"""Random values shaped like real credentials: tokens, passwords, PEM blocks, JWTs."""

from __future__ import annotations

import base64
import json
import random
import string

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "_-"
HEX = "0123456789abcdef"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
PUNCT = "!#%@/?^*~+=.-_"


def pick(rng: random.Random, alphabet: str, n: int) -> str:
    """n characters drawn from the alphabet."""
    return "".join(rng.choice(alphabet) for _ in range(n))


def mixed(rng: random.Random, alphabet: str, n: int) -> str:
    """n characters with upper case, lower case and (when the alphabet has them) a digit."""
    # Upper, lower and a digit, as every real random token of this length has.
    while True:
        value = pick(rng, alphabet, n)
        digit = any(c.isdigit() for c in value) or not any(c.isdigit() for c in alphabet)
        if digit and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


def password(rng: random.Random) -> str:
    """A password as people make them: letters, digits and shell-awkward punctuation."""
    core = mixed(rng, ALNUM, rng.randint(8, 14))
    spots = rng.sample(range(1, len(core)), 2)
    chars = list(core)
    for spot in spots:
        chars[spot] = rng.choice(PUNCT)
    # It starts with a letter: `host:8080/path@v2` is a port and a path, so a URL password
    # of digits then `/` is kept (see pipeline.redaction.patterns).
    return rng.choice(string.ascii_letters) + "".join(chars) + rng.choice(string.digits)


def pem(rng: random.Random, label: str) -> str:
    """A PEM block of random base64 lines."""
    lines = [pick(rng, ALNUM + "+/", 64) for _ in range(rng.randint(4, 9))]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def jwt(rng: random.Random) -> str:
    """A JWT with a real header, random claims and a random signature."""
    head = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').decode().rstrip("=")
    claims = json.dumps({"sub": pick(rng, HEX, 12), "exp": rng.randint(10**9, 2 * 10**9)})
    body = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    return f"{head}.{body}.{mixed(rng, B64URL, 86)}"


# A vendor token's name as an env variable, and how to make one.
def b64(text: str) -> str:
    """Base64 of a text."""
    return base64.b64encode(text.encode()).decode()
