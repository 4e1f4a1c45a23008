"""`kompl archive`, `unarchive`, `delete` and `recompile`: take a source back, bring it back, or rebuild it."""

from __future__ import annotations

import sys
from contextlib import closing
from typing import Annotated

import typer

from kompl.cli.common import err_console, esc, open_workspace, out_console, print_json
from kompl.errors import EXIT_ERROR, EXIT_FAILURES, KomplError

SOURCE_HELP = "The source: its id (or a unique id prefix), or a unique part of its title or input."


def archive(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help=SOURCE_HELP)],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with what changed.")] = False,
) -> None:
    """Take a source out of search, ask, chat, MCP and entity promotion, at once (reversible).

    Pages only archived sources support are hidden, not deleted; pages that other
    sources support lose its statements (a new version; `kompl unarchive` brings them back).

    Example:

        kompl archive src-89584eb5491d
    """
    from kompl.maintain import archive as run

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run(ws, conn, source)
    _show(report, json_out)


def unarchive(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help=SOURCE_HELP)],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with what changed.")] = False,
) -> None:
    """Bring an archived source back: its pages reappear and its statements return.

    Example:

        kompl unarchive "The First Patient"
    """
    from kompl.maintain import unarchive as run

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run(ws, conn, source)
    _show(report, json_out)


def delete(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help=SOURCE_HELP)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed without a terminal).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with what was removed and re-planned.")] = False,
) -> None:
    """Delete a source and what only it supported; pages shared with other sources lose its statements.

    Pages only it supports are deleted (their history stays); the others are
    re-drafted without it (see `kompl drafts`). Its mentions, claims, names and files
    go. Safe to run again after an interruption: it finishes the job.

    Example:

        kompl delete src-89584eb5491d --yes
    """
    from kompl.maintain import delete as run
    from kompl.maintain import find_source

    ws, conn = open_workspace(ctx)
    with closing(conn):
        if not yes:
            try:
                row = find_source(conn, source)
                label = f"{row['source_id']} ({row['title']})"
            except KomplError:
                label = source  # an interrupted delete is resumed by id; the service reports a bad name
            if not sys.stdin.isatty():
                raise KomplError(f"Not deleting {label} without confirmation: no terminal to ask on",
                                 hint="add --yes to delete without being asked")
            if not typer.confirm(f"Delete {label} and every statement only it supports?", default=False):
                err_console().print("Nothing deleted.")
                raise typer.Exit(EXIT_ERROR)
        report = run(ws, conn, source)
    _show(report, json_out)


def recompile(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help=SOURCE_HELP)],
    model: Annotated[str | None, typer.Option("--model", help="The model to use (default: the workspace's).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with each stage's report.")] = False,
) -> None:
    """Re-extract one source (even when up to date), then re-plan and draft what its pages need.

    Example:

        kompl recompile src-89584eb5491d --json
    """
    from kompl.maintain import recompile as run

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run(ws, conn, source, model=model)
    _show(report, json_out)
    if report.draft_failed or report.stages.get("extract", {}).get("failed"):
        raise typer.Exit(EXIT_FAILURES)


def _show(report, json_out: bool) -> None:
    if json_out:
        print_json(report.to_dict())
        return
    console = out_console()
    src = report.source
    verb = {"archive": "archived", "unarchive": "unarchived", "delete": "deleted", "recompile": "recompiled"}
    state = verb[report.action] if report.changed or report.action == "recompile" else f"already {verb[report.action]}"
    console.print(f"{esc(src['source_id'])} ({esc(src['title'])}): {state}.")
    lines = [
        ("hidden (only archived sources left)", report.hidden_pages),
        ("its statements taken out of", report.redacted_pages),
        ("its statements restored on", report.restored_pages),
        ("deleted (only it supported them)", report.deleted_pages),
    ]
    for label, pages in lines:
        if pages:
            console.print(f"  {label}: {len(pages)} page(s): " + ", ".join(esc(p["title"]) for p in pages[:8])
                          + (" …" if len(pages) > 8 else ""))
    if report.plans_created:
        console.print(f"  re-planned: {len(report.plans_created)} page(s); drafted: {len(report.drafted)}, "
                      f"unchanged by the re-draft: {len(report.draft_noop)}, approved: {len(report.approved)}")
    if report.aliases_pruned or report.entities_pruned:
        console.print(f"  names pruned: {len(report.aliases_pruned)} alias(es), {len(report.entities_pruned)} entit(ies)")
    if report.files_removed:
        console.print(f"  files removed: {report.files_removed.get('raw', 0)} raw, "
                      f"{report.files_removed.get('originals', 0)} original")
    for failure in report.draft_failed:
        err_console().print(f"  [red]draft failed[/] plan {failure['plan_id']}: {esc(failure['error'])}")
    if report.vectors.get("error"):
        err_console().print(f"  vectors not updated: {esc(report.vectors['error'])} (run `kompl doctor --fix`)")
    for note in report.notes:
        console.print(f"  {esc(note)}")
