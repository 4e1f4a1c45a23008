"""The `kompl` command: puts the command modules together.

Imports only typer and the standard library at module level, so `kompl --help`
starts fast; heavy libraries load inside the commands that need them.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kompl import __version__
from kompl.cli import (
    archive_cmds,
    compile_cmds,
    demo_cmds,
    doctor_cmds,
    draft_cmds,
    extract_cmds,
    ingest_cmds,
    lint_cmds,
    llm_cmds,
    maintain_cmds,
    log_cmds,
    pages_cmds,
    read_cmds,
    resolve_cmds,
    review_cmds,
    workspace_cmds,
)
from kompl.cli.common import KomplGroup

app = typer.Typer(
    cls=KomplGroup,
    name="kompl",
    rich_markup_mode=None,
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


BUILD, REVIEW, READ, CHECK, STAGES = "Build the wiki", "Review drafts", "Read the wiki", "Check and maintain", "Run one stage"

app.command(rich_help_panel=BUILD)(workspace_cmds.init)
app.command(rich_help_panel=BUILD)(ingest_cmds.ingest)
app.command(name="compile", rich_help_panel=BUILD)(compile_cmds.compile_)
app.command(rich_help_panel=BUILD)(demo_cmds.demo)
app.command(rich_help_panel=REVIEW)(review_cmds.drafts)
app.command(rich_help_panel=REVIEW)(review_cmds.diff)
app.command(rich_help_panel=REVIEW)(review_cmds.approve)
app.command(rich_help_panel=REVIEW)(review_cmds.reject)
app.command(rich_help_panel=READ)(read_cmds.search)
app.command(rich_help_panel=READ)(read_cmds.ask)
app.command(rich_help_panel=READ)(read_cmds.chat)
app.command(rich_help_panel=READ)(pages_cmds.pages)
app.command(rich_help_panel=READ)(pages_cmds.show)
app.command(rich_help_panel=READ)(pages_cmds.history)
app.command(rich_help_panel=READ)(read_cmds.mcp)
app.command(rich_help_panel=CHECK)(workspace_cmds.status)
app.command(rich_help_panel=CHECK)(ingest_cmds.sources)
app.command(rich_help_panel=CHECK)(llm_cmds.stats)
app.command(rich_help_panel=CHECK)(doctor_cmds.doctor)
app.command(rich_help_panel=CHECK)(doctor_cmds.conflicts)
app.command(rich_help_panel=CHECK)(lint_cmds.lint)
app.command(rich_help_panel=CHECK)(log_cmds.log)
app.command(rich_help_panel=CHECK)(archive_cmds.export)
app.command(name="import", rich_help_panel=CHECK)(archive_cmds.import_)
app.command(rich_help_panel=CHECK)(maintain_cmds.archive)
app.command(rich_help_panel=CHECK)(maintain_cmds.unarchive)
app.command(rich_help_panel=CHECK)(maintain_cmds.delete)
app.command(rich_help_panel=CHECK)(maintain_cmds.recompile)
app.add_typer(resolve_cmds.aliases_app, name="aliases", rich_help_panel=CHECK)
app.command(rich_help_panel=STAGES)(extract_cmds.extract)
app.command(rich_help_panel=STAGES)(resolve_cmds.resolve)
app.command(rich_help_panel=STAGES)(review_cmds.plan)
app.command(rich_help_panel=STAGES)(draft_cmds.draft)

def run() -> None:
    app()
