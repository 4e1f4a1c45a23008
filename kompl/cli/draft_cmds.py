"""`kompl draft`: write drafts for open page plans into the pending outbox."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import ProgressBar, err_console, esc, finish, open_workspace, out_console


def draft(
    ctx: typer.Context,
    plan: Annotated[Optional[list[int]], typer.Option("--plan", help="Only this plan id (repeatable).", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Model that writes the drafts (any litellm model string; default: the workspace's, kompl/offline unless set).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: drafted, noop, failed, skipped, model_calls.")] = False,
) -> None:
    """Draft every planned (or failed) page plan into the pending outbox.

    Each draft is written from schema.md, the existing page (updates), a dossier
    of what the sources say and the relevant passages; over the model's input
    budget the passages are summarised first (recorded as left out). A plan
    whose draft fails stays retryable; the command exits 1 and lists it.

    Examples:

        kompl draft

        kompl draft --plan 12 --model openai/gpt-4o-mini --json
    """
    from kompl.pipeline.draft import draft_pending

    ws, conn = open_workspace(ctx)
    with closing(conn):
        with ProgressBar("draft", enabled=not json_out, advance_on="plan",
                         describe=lambda info: info.get("title", "")) as on_progress:
            report = draft_pending(ws, conn, model=model, plan_ids=plan or None, on_progress=on_progress)
    finish(report, json_out, _summary)


def _summary(report) -> None:
    console, err = out_console(), err_console()
    for notice in report.notices:
        err.print(f"[yellow]note:[/] {esc(notice)}")
    for row in report.drafted:
        extra = f" [yellow]({len(row['left_out'])} left-out note(s))[/]" if row["left_out"] else ""
        console.print(f"[green]drafted[/] #{row['plan_id']} {esc(row['page_type'])} {esc(row['title'][:60])}{extra}")
    for row in report.noop:
        console.print(f"[dim]no change[/] #{row['plan_id']} {esc(row['title'][:60])}")
    for skip in report.skipped:
        console.print(f"[dim]skipped[/] #{skip['plan_id']}: {esc(skip['reason'])}")
    for fail in report.failed:
        err.print(f"[bold red]failed[/] #{fail['plan_id']} ({esc(fail['title'][:60])}): {esc(fail['error'])}")
    console.print(
        f"{len(report.drafted)} drafted, {len(report.noop)} unchanged, {len(report.failed)} failed; "
        f"{report.model_calls} model call(s) with {esc(report.model)} in {report.seconds:.1f} s"
        + (" (failed plans stay retryable: run `kompl draft` again)" if report.failed else "")
    )
