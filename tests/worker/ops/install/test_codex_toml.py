"""`[mcp_servers.memq]` in Codex's config.toml: the user's comments and tables stay as written."""

from __future__ import annotations

import tomllib

import pytest

from worker.ops.install.codex_toml import PASSED_ENV_VARS, drop_memq_server, put_memq_server
from worker.ops.install.hook_entries import ShapeError

MEMQ = "/x/bin/memq"
USER = """# my codex
model = "gpt-5.5"  # the fast one

[mcp_servers.other]
command = "other"
args = ["serve"]

[projects."/home/dev/webapp"]
trust_level = "trusted"
"""


@pytest.mark.parametrize(
    "text", [USER, "", 'model = "m"\n', "mcp_servers = { other = { command = 'o' } }\n"]
)
def test_put_then_drop_gives_back_the_users_file(text: str) -> None:
    put = put_memq_server(text, MEMQ)
    assert tomllib.loads(put)["mcp_servers"]["memq"] == {
        "command": MEMQ, "args": ["mcp"], "env_vars": list(PASSED_ENV_VARS),
    }  # fmt: skip
    assert put_memq_server(put, MEMQ) == put
    assert drop_memq_server(put) == text
    assert drop_memq_server(text) == text


def test_put_keeps_comments_and_other_tables() -> None:
    put = put_memq_server(USER, MEMQ)
    assert put.startswith(USER.split("[projects.")[0])
    assert "# the fast one" in put
    assert tomllib.loads(put)["projects"] == {"/home/dev/webapp": {"trust_level": "trusted"}}


def test_put_updates_an_older_memq_table_and_keeps_its_other_keys() -> None:
    old = '[mcp_servers.memq]\ncommand = "memq"\nargs = ["mcp"]\nstartup_timeout_sec = 20\n'
    server = tomllib.loads(put_memq_server(old, MEMQ))["mcp_servers"]["memq"]
    assert server == {"command": MEMQ, "args": ["mcp"], "startup_timeout_sec": 20}


@pytest.mark.parametrize(
    ("text", "reason"),
    [("model = \n", "not valid TOML"), ("mcp_servers = 3\n", "`mcp_servers` is not a table")],
)
def test_broken_or_odd_toml_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ShapeError, match=reason):
        put_memq_server(text, MEMQ)
