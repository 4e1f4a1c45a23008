"""`kompl extract`: entities, concepts, claims and relationships from the sources."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import ProgressBar, err_console, esc, finish, open_workspace, out_console


def extract(
    ctx: typer.Context,
    source: Annotated[Optional[list[str]], typer.Option("--source", help="Only this source id (repeatable).", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Model for the model pass (any litellm model string; default: the workspace's, kompl/offline unless set).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Extract again even sources that are up to date.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: extracted, up_to_date, skipped, failed, model_calls.")] = False,
) -> None:
    """Extract entities, concepts, claims and relationships from active sources.

    Each source is read by local NLP (spaCy: entities, TF-IDF keyphrases), then by
    the model, chunk by chunk for long sources. Sources already extracted with the
    same content, extractor version and model are skipped at no cost. A source
    whose model call fails stays pending; the command exits 1 and lists it.

    Examples:

        kompl extract

        kompl extract --source src-0123456789ab --model openai/gpt-4o-mini --json
    """
    from kompl.pipeline.extract import extract_pending

    ws, conn = open_workspace(ctx)
    with closing(conn):
        with ProgressBar("extract", enabled=not json_out, advance_on="source",
                         describe=lambda info: info.get("title", "")) as on_progress:
            report = extract_pending(ws, conn, model=model, source_ids=source or None,
                                     on_progress=on_progress, force=force)
    finish(report, json_out, _summary)


def _summary(report) -> None:
    from rich.table import Table

    console, err = out_console(), err_console()
    for notice in report.notices:
        err.print(f"[yellow]note:[/] {esc(notice)}")
    if report.extracted:
        table = Table(title=f"Extracted with {esc(report.model)}", title_justify="left")
        table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=18)
        for col in ("chunks", "entities", "concepts", "claims", "relations", "secs"):
            table.add_column(col, justify="right", no_wrap=True)
        for row in report.extracted:
            table.add_row(esc(row["title"][:80]), str(row["chunks"]), str(row["entities"]),
                          str(row["concepts"]), str(row["claims"]), str(row["relationships"]), f"{row['seconds']:.2f}")
        console.print(table)
    for skip in report.skipped:
        console.print(f"[dim]skipped[/] {esc(skip['source_id'])}: {esc(skip['reason'])}")
    for fail in report.failed:
        err.print(f"[bold red]failed[/] {esc(fail['source_id'])} ({esc(fail['title'][:60])}): {esc(fail['error'])}")
    console.print(
        f"{len(report.extracted)} extracted, {report.up_to_date} up to date, {len(report.failed)} failed; "
        f"{report.model_calls} model call(s) in {report.seconds:.1f} s"
        + (" (failed sources stay pending: run `kompl extract` again)" if report.failed else "")
    )
