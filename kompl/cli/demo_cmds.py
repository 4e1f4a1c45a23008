"""`kompl demo`: build a wiki from the bundled example corpus, offline."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from kompl.cli.common import esc, out_console, print_json
from kompl.errors import EXIT_FAILURES


def demo(
    directory: Annotated[Path, typer.Argument(help="Where to create the demo workspace.")] = Path("kompl-demo"),
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Create a workspace from the bundled example (seven documents about penicillin) and run the main job on it.

    Runs ingest, extract and resolve with the configured model (the offline one
    by default: no API key, no network). Run it again to see that nothing is
    stored twice and no model call is repeated.

    Example:

        kompl demo /tmp/penicillin-wiki && kompl --home /tmp/penicillin-wiki sources
    """
    from kompl import db
    from kompl.demo import example_dir
    from kompl.ingest import expand, ingest
    from kompl.pipeline.extract import extract_pending
    from kompl.pipeline.resolve import resolve
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(directory)
    conn = db.connect(ws.db_path)
    with closing(conn):
        items, report = expand([str(example_dir())])
        report = ingest(ws, conn, items, report=report)
        extracted = extract_pending(ws, conn)
        resolved = resolve(ws, conn)
    ok = report.ok and extracted.ok and not resolved.model_errors
    if json_out:
        print_json({"workspace": str(ws.root), "ingest": report.to_dict(),
                    "extract": extracted.to_dict(), "resolve": resolved.to_dict()})
    else:
        console = out_console()
        home = esc(ws.root)
        console.print(f"Workspace: [bold]{home}[/] (model: {esc(extracted.model)})")
        console.print(f"ingest:  {len(report.ingested)} new, {len(report.duplicates)} already there, {len(report.failed)} failed")
        console.print(f"extract: {len(extracted.extracted)} extracted, {extracted.up_to_date} up to date, {len(extracted.failed)} failed")
        console.print(f"resolve: {resolved.new_names} new names, {resolved.entities_merged} merged, {resolved.pending} pending review")
        for notice in extracted.notices:
            console.print(f"[yellow]note:[/] {esc(notice)}")
        console.print(f"Next: [bold]kompl --home {home} aliases[/], [bold]kompl --home {home} stats[/]")
    if not ok:
        raise typer.Exit(EXIT_FAILURES)
