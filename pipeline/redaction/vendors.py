"""Vendor tokens recognised by their prefix (`ghp_`, `sk-`, `ya29.`, `hf_` …), wherever they stand.

Formats follow public secret-scanning rulesets (gitleaks, GitHub secret scanning). A
pattern starts with its literal prefix (the engine then skips ahead fast) and checks the
character before it with a look-behind that excludes the body's alphabet: inside a run of
token characters a match is tried once, so every scan stays linear.
"""

from __future__ import annotations

from pipeline.redaction.finders import SecretPattern, pattern, regex, token

_B64 = "A-Za-z0-9_-"  # base64url, the alphabet of most token bodies

VENDOR_PATTERNS: tuple[SecretPattern, ...] = (
    pattern(
        "anthropic-api-key",
        token(rf"sk-ant-(?<![{_B64}]sk-ant-)(?P<body>[{_B64}]{{32,}})", mixed=True),
        "sk-ant-",
    ),
    pattern(
        "openai-api-key",
        token(
            rf"sk-(?<![{_B64}]sk-)(?!ant-)(?:(?:proj|svcacct|admin)-)?(?P<body>[{_B64}]{{32,}})",
            mixed=True,
        ),
        "sk-",
    ),
    pattern(
        "github-token",
        token(r"gh[pousr]_(?<![\w]gh._)(?P<body>[A-Za-z0-9]{36,251})(?![\w])"),
        "gh[pousr]_",
    ),
    pattern(
        "github-token",
        token(r"github_pat_(?<![\w]github_pat_)(?P<body>\w{50,240})(?![\w])"),
        "github_pat_",
    ),
    pattern(
        "gitlab-token",
        token(r"gl(?:pat|ptt|dt|rt|cbt|oas|ft|imt|agent)-(?P<body>[\w-]{20,})", min_distinct=8),
        "gl(?:pat|ptt|dt|rt|cbt|oas|ft|imt|agent)-",
    ),
    pattern(
        "aws-access-key",
        token(
            r"A[KS]IA(?<![A-Za-z0-9+/]A[KS]IA)(?P<body>[A-Z0-9]{16})(?![A-Za-z0-9+/])",
            min_distinct=5,
        ),
        "a[ks]ia",
    ),
    pattern(
        "slack-webhook",
        token(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<body>[\w/+-]{20,})"),
        r"https://hooks\.slack\.com/",
    ),
    pattern(
        "slack-token",
        token(rf"xox[abprse]-(?<![{_B64}]xox.-)(?P<body>[A-Za-z0-9-]{{20,}})", digit=True),
        "xox[abprse]-",
    ),
    pattern(
        "slack-token",
        token(rf"xapp-(?<![{_B64}]xapp-)(?P<body>[A-Za-z0-9-]{{20,}})", digit=True),
        "xapp-",
    ),
    pattern(
        "stripe-key",
        token(r"[rs]k_(?:live|test)_(?<![\w][rs]k_...._)(?P<body>[A-Za-z0-9]{20,})"),
        "k_(?:live|test)_",
    ),
    pattern(
        "stripe-webhook-secret",
        token(r"whsec_(?<![\w]whsec_)(?P<body>[A-Za-z0-9+/]{24,}={0,2})"),
        "whsec_",
    ),
    pattern(
        "google-api-key",
        token(rf"AIza(?<![{_B64}]AIza)(?P<body>[{_B64}]{{35}})(?![{_B64}])"),
        "aiza",
    ),
    pattern(
        "gcp-access-token",
        token(rf"ya29\.(?<![{_B64}]ya29\.)(?P<body>[A-Za-z0-9_.-]{{20,}})", min_distinct=8),
        r"ya29\.",
    ),
    pattern(
        "mailgun-key",
        token(r"key-(?<![\w-]key-)(?P<body>[a-f0-9]{32})(?![\w])", digit=True),
        "key-",
    ),
    pattern("npm-token", token(r"npm_(?<![\w]npm_)(?P<body>[A-Za-z0-9]{36})(?![\w])"), "npm_"),
    pattern(
        "pypi-token",
        token(rf"pypi-(?<![{_B64}]pypi-)(?P<body>AgE[{_B64}]{{40,}})"),
        "pypi-age",
    ),
    pattern(
        "huggingface-token",
        token(r"(?:hf_|api_org_)(?<![\w]hf_)(?P<body>[A-Za-z]{34})(?![\w])", cased=True),
        "hf_",
        "api_org_",
    ),
    pattern(
        "sendgrid-key",
        token(rf"SG\.(?<![{_B64}]SG\.)(?P<body>[{_B64}]{{16,32}}\.[{_B64}]{{30,64}})(?![{_B64}])"),
        r"sg\.",
    ),
    pattern(
        "vault-token",
        token(rf"hv[sbr]\.(?<![{_B64}]hv.\.)(?P<body>[{_B64}]{{24,}})", min_distinct=8),
        r"hv[sbr]\.",
    ),
    pattern(
        "digitalocean-token",
        token(r"do[opr]_v1_(?<![\w]do._v1_)(?P<body>[a-f0-9]{64})(?![\w])"),
        "do[opr]_v1_",
    ),
    pattern(
        "shopify-token",
        token(r"shp(?:at|ca|pa|ss)_(?<![\w]shp.._)(?P<body>[a-fA-F0-9]{32})(?![\w])"),
        "shp(?:at|ca|pa|ss)_",
    ),
    pattern(
        "databricks-token",
        token(r"dapi(?<![\w]dapi)(?P<body>[a-f0-9]{32})(?:-[0-9])?(?![\w])", digit=True),
        "dapi",
    ),
    pattern(
        "twilio-api-key",
        token(r"SK(?<![A-Za-z0-9_]SK)(?P<body>[0-9a-fA-F]{32})(?![A-Za-z0-9_])", digit=True),
        "sk[0-9a-f]{32}",
    ),
    pattern(
        "age-secret-key",
        token(r"AGE-SECRET-KEY-1(?P<body>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})"),
        "age-secret-key-1",
    ),
    pattern(
        "azure-client-secret",
        token(
            r"(?<![\w~.-])[A-Za-z0-9_~.]{3}[0-9]Q~(?P<body>[\w~.-]{31,34})(?![\w~.-])",
            min_distinct=10,
        ),
        "q~",
    ),
    pattern(
        "telegram-bot-token",
        # Also inside `api.telegram.org/bot<token>/sendMessage`.
        token(
            rf"(?:(?<=bot)|(?<![\w]))[0-9]{{8,10}}:(?P<body>AA[{_B64}]{{33}})(?![{_B64}])",
            min_distinct=10,
        ),
        ":aa",
    ),
    pattern(
        "jwt",
        regex(
            rf"eyJ(?<![{_B64}]eyJ)[{_B64}]{{10,}}\.eyJ[{_B64}]{{10,}}\.[{_B64}]{{10,}}"
            rf"(?:\.[{_B64}]+){{0,2}}",
            lambda m: m.span(),
        ),
        "eyj",
    ),
)
"""Every prefixed vendor token, most specific first (that order breaks ties between overlaps)."""
