"""`add_group`: a command group runs its commands in order, and alone shows its help."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from worker.cli.app import app
from worker.cli.groups import add_group

RUNNER = CliRunner()


def test_a_group_runs_its_commands_and_alone_shows_its_help() -> None:
    root = typer.Typer()
    root.command("other")(lambda: None)  # with one command typer would flatten the group away
    commands = {"b-first": lambda: typer.echo("b"), "a": lambda: None}
    add_group(root, "things", "Things to do.", commands)

    ran = RUNNER.invoke(root, ["things", "b-first"])
    alone = RUNNER.invoke(root, ["things"])

    assert (ran.exit_code, ran.output) == (0, "b\n")
    assert "Things to do." in alone.output
    assert alone.output.index("b-first") < alone.output.index(" a ")


@pytest.mark.parametrize(
    ("group", "commands"),
    [("dlq", ["list", "replay"]), ("modes", ["list", "show"]), ("redis", ["status", "stop"]),
     ("spool", ["flush", "status"])],
)  # fmt: skip
def test_memq_groups_list_their_commands(group: str, commands: list[str]) -> None:
    alone = RUNNER.invoke(app, [group])

    assert f"Usage: memq {group} [OPTIONS] COMMAND" in alone.output
    assert all(f"│ {command} " in alone.output for command in commands)
