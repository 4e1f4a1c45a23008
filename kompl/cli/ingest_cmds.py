"""`kompl ingest` and `kompl sources`: add documents and list what is stored."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Optional

import typer

from kompl.cli.common import ProgressBar, esc, finish, open_workspace, out_console, print_json
from kompl.errors import KomplError


def ingest(
    ctx: typer.Context,
    inputs: Annotated[Optional[list[str]], typer.Argument(help="Files, folders (recursive), http(s) URLs, or - for standard input.", show_default=False)] = None,
    glob: Annotated[Optional[str], typer.Option(help="Only files in folders whose name matches this pattern, e.g. '*.pdf'.")] = None,
    bookmarks: Annotated[Optional[Path], typer.Option(help="A browser bookmarks export (HTML): every http(s) link is ingested.")] = None,
    title: Annotated[Optional[str], typer.Option(help="Title for a single input (standard input needs one most).")] = None,
    allow_private: Annotated[bool, typer.Option("--allow-private", help="Allow URLs on loopback, private and link-local addresses.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Try every input that failed before again.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: ingested, duplicates, failed.")] = False,
) -> None:
    """Convert documents to markdown and store them as sources (deduplicated by content).

    Supported: PDF, DOCX, PPTX, XLSX, HTML, Markdown, text, CSV, JSON (and EPUB,
    ZIP, notebooks). A failing input never stops the batch: it is listed by
    `kompl sources --failed` and retried by `kompl ingest --retry-failed`.
    Exit code 0 when every input was stored or was a duplicate, 1 when any failed.

    Examples:

        kompl ingest report.pdf notes/ --glob '*.md'

        kompl ingest https://example.org/article

        kompl ingest --bookmarks bookmarks.html

        pbpaste | kompl ingest - --title "Meeting notes"
    """
    from kompl.ingest import expand, ingest as run_ingest, retry_inputs

    if not inputs and not bookmarks and not retry_failed:
        raise KomplError("Nothing to ingest", hint="give files, folders, URLs or -, or --bookmarks FILE, or --retry-failed")
    ws, conn = open_workspace(ctx)
    with closing(conn):
        items, report = expand(inputs or [], glob=glob, bookmarks=bookmarks,
                               stdin=lambda: sys.stdin.buffer.read(), title=title, exclude=ws.data)
        if retry_failed:
            items.extend(retry_inputs(ws, conn))
        with ProgressBar("ingest", enabled=not json_out and len(items) > 1, advance_on="item",
                         describe=lambda info: Path(info["input"]).name) as on_progress:
            report = run_ingest(ws, conn, items, report=report,
                                allow_private=allow_private or None, on_progress=on_progress)
    finish(report, json_out, _summary)


def _stderr():
    from kompl.cli.common import err_console

    return err_console()


def _summary(report) -> None:
    from rich.table import Table

    console = out_console()
    if report.ingested:
        table = Table(title="Ingested", title_justify="left")
        for col in ("source", "title", "type"):
            table.add_column(col)
        for row in report.ingested:
            table.add_row(row["source_id"], esc(row["title"]), row["source_type"])
        console.print(table)
    for dup in report.duplicates:
        console.print(f"[yellow]duplicate[/] {esc(dup['input'])} is already stored as {dup['source_id']} ({esc(dup['title'])})")
    for skip in report.skipped:
        console.print(f"[dim]skipped[/] {esc(skip['input'])}: {esc(skip['reason'])}")
    err = _stderr()
    for fail in report.failed:
        err.print(f"[bold red]failed[/] {esc(fail['error'])}")
        if fail.get("hint"):
            err.print(f"       [dim]{esc(fail['hint'])}[/]")
    console.print(
        f"{len(report.ingested)} ingested, {len(report.duplicates)} duplicate, {len(report.failed)} failed"
        + (" (see `kompl sources --failed`, retry with `kompl ingest --retry-failed`)" if report.failed else "")
    )


def sources(
    ctx: typer.Context,
    failed: Annotated[bool, typer.Option("--failed", help="List inputs that failed to ingest instead.")] = False,
    status: Annotated[Optional[str], typer.Option(help="Only sources with this status: active or archived.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List stored sources (or, with --failed, the inputs that could not be ingested).

    Examples:

        kompl sources --status active

        kompl sources --failed --json
    """
    from kompl.ingest import store

    if status not in (None, "active", "archived"):
        raise KomplError(f"Unknown status {status!r}", hint="use active or archived")
    ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = store.open_failures(conn) if failed else store.list_sources(conn, status)
    if json_out:
        print_json(rows)
        return
    from rich.table import Table

    console = out_console()
    if failed:
        table = Table("id", "input", "error", "attempts", "when")
        for r in rows:
            table.add_row(str(r["id"]), esc(r["input"]), esc(r["error"]), str(r["attempts"]), r["failed_at"][:19])
    else:
        table = Table("source", "title", "type", "status", "ingested")
        for r in rows:
            table.add_row(r["source_id"], esc(r["title"]), r["source_type"], r["status"], r["ingested_at"][:19])
    console.print(table if rows else ("No failed inputs." if failed else "No sources yet: add some with `kompl ingest`."))
