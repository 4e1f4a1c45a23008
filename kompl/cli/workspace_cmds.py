"""`kompl init` and `kompl status`: create a workspace and see where it stands."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated, Optional

import typer

from kompl.cli.common import esc, home_of, open_workspace, out_console, print_json


def init(
    ctx: typer.Context,
    directory: Annotated[Optional[Path], typer.Argument(help="Where to create the workspace (default: --home, KOMPL_HOME or the current folder).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Create a workspace: schema.md, data/ (raw, originals, pages, history, vectors) and kompl.db.

    Safe to run again: an existing workspace is completed, never overwritten.

    Example:

        kompl init ~/wiki && cd ~/wiki && kompl ingest ~/papers
    """
    from kompl.workspace import init_workspace, resolve_home

    root = directory if directory is not None else resolve_home(home_of(ctx))
    ws, created = init_workspace(Path(root))
    if json_out:
        print_json({"workspace": str(ws.root), "created": created})
        return
    verb = "Created" if created else "Workspace already exists at"
    out_console().print(f"{verb} [bold]{esc(ws.root)}[/]")
    if created:
        out_console().print("Next: [bold]kompl ingest FILES_OR_FOLDERS[/] (edit schema.md to change the wiki's conventions)")


def status(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Show the workspace: where it is, sources by status, the model, and pending work.

    Example:

        kompl status --json
    """
    from kompl import status as status_service

    ws, conn = open_workspace(ctx)
    with closing(conn):
        info = status_service.workspace_status(ws, conn)
    if json_out:
        print_json(info)
        return
    from rich.table import Table

    table = Table(show_header=False, box=None)
    table.add_row("workspace", esc(info["workspace"]))
    table.add_row("model", esc(info["model"]))
    for name, count in info["sources"].items():
        table.add_row(f"sources {name}", str(count))
    table.add_row("pages", str(info["pages"]))
    table.add_row("failed inputs", str(info["failed_inputs"]))
    for name, count in info["pending"].items():
        table.add_row(f"pending: {name.replace('_', ' ')}", str(count))
    console = out_console()
    console.print(table)
    for plan in info["failed_drafts"]:
        console.print(f"[red]draft failed[/] plan {plan['plan_id']} ({esc(plan['title'])}) after "
                      f"{plan['attempts']} attempt(s): {esc(plan['error'] or '')}")
    if info["failed_drafts"]:
        console.print("Failed drafts stay pending: `kompl compile` tries them again.")
    if info["failed_inputs"]:
        console.print("See [bold]kompl sources --failed[/]; retry with [bold]kompl ingest --retry-failed[/]")
