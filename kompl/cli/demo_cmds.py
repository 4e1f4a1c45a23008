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

    Works offline with no API key. Run it again to see that nothing is stored twice.

    Example:

        kompl demo /tmp/penicillin-wiki && kompl --home /tmp/penicillin-wiki sources
    """
    from kompl import db
    from kompl.demo import example_dir
    from kompl.ingest import expand, ingest
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(directory)
    conn = db.connect(ws.db_path)
    with closing(conn):
        items, report = expand([str(example_dir())])
        report = ingest(ws, conn, items, report=report)
    if json_out:
        print_json({"workspace": str(ws.root), "ingest": report.to_dict()})
    else:
        console = out_console()
        console.print(f"Workspace: [bold]{esc(ws.root)}[/]")
        console.print(f"Ingested {len(report.ingested)} example documents "
                      f"({len(report.duplicates)} already there, {len(report.failed)} failed).")
        console.print(f"Next: [bold]kompl --home {esc(ws.root)} sources[/]")
    if not report.ok:
        raise typer.Exit(EXIT_FAILURES)
