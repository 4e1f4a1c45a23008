"""The `kompl` command: puts the command modules together.

Imports only typer and the standard library at module level, so `kompl --help`
starts fast; heavy libraries load inside the commands that need them.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kompl import __version__
from kompl.cli import demo_cmds, ingest_cmds, llm_cmds, pages_cmds, workspace_cmds
from kompl.cli import extract_cmds
from kompl.cli import resolve_cmds
from kompl.cli import review_cmds
from kompl.cli import draft_cmds
from kompl.cli import doctor_cmds
from kompl.cli import read_cmds
from kompl.cli.common import KomplGroup

app = typer.Typer(
    cls=KomplGroup,
    name="kompl",
    help=(
        "kompl compiles documents into a reviewed, interlinked, cited wiki.\n\n"
        "Start with `kompl init DIR`, then `kompl ingest FILES...`. Every command finds its "
        "workspace from --home, then KOMPL_HOME, then the current folder."
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"kompl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    home: Annotated[Optional[str], typer.Option("--home", envvar="KOMPL_HOME", help="Workspace folder (default: the current folder).")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")] = False,
) -> None:
    ctx.obj = {"home": home}


app.command()(workspace_cmds.init)
app.command()(ingest_cmds.ingest)
app.command()(ingest_cmds.sources)
app.command()(extract_cmds.extract)
app.command()(workspace_cmds.status)
app.command()(resolve_cmds.resolve)
app.add_typer(resolve_cmds.aliases_app, name="aliases")
app.command()(llm_cmds.stats)
app.command()(demo_cmds.demo)
app.command()(pages_cmds.pages)
app.command()(pages_cmds.show)
app.command()(pages_cmds.history)
app.command()(review_cmds.plan)
app.command()(draft_cmds.draft)
app.command()(review_cmds.drafts)
app.command()(review_cmds.diff)
app.command()(review_cmds.approve)
app.command()(review_cmds.reject)
app.command()(doctor_cmds.doctor)
app.command()(doctor_cmds.conflicts)
app.command()(read_cmds.search)
app.command()(read_cmds.ask)
app.command()(read_cmds.chat)
app.command()(read_cmds.mcp)


def run() -> None:
    app()
