"""`kompl plan`, `drafts`, `diff`, `approve` and `reject`: the pending outbox and the decisions on it."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer

from kompl.cli.common import err_console, esc, open_workspace, out_console, print_json
from kompl.errors import EXIT_FAILURES


def plan(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with the plans made.")] = False,
) -> None:
    """Decide which pages to create or update (no model call); `kompl compile` runs this for you.

    Re-planning unchanged sources creates nothing.

    Example:

        kompl plan --json
    """
    from kompl.pipeline.plan import plan_pending

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = plan_pending(ws, conn)
    if json_out:
        print_json(report.to_dict())
        return
    console = out_console()
    for c in report.created:
        console.print(f"  {c['plan_id']:>5}  {c['action']:<6}  {c['page_type']:<15}  {esc(c['title'])}")
    console.print(f"{len(report.created)} new plan(s), {len(report.superseded)} superseded, "
                  f"{report.unchanged} unchanged, {report.tombstoned} ruled out by rejections.")


def drafts(
    ctx: typer.Context,
    all_: Annotated[bool, typer.Option("--all", help="Every plan, whatever its status (default: drafts waiting for review).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List the drafts waiting for review (the pending outbox).

    Examples:

        kompl drafts

        kompl drafts --all --json
    """
    from kompl.review import EVERY_STATUS, OUTBOX, list_drafts

    _ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = list_drafts(conn, EVERY_STATUS if all_ else OUTBOX)
    if json_out:
        print_json([{"plan_id": d.plan_id, "title": d.title, "page_type": d.page_type, "action": d.action,
                     "status": d.status, "sources": d.sources, "new_sources": d.new_sources, "model": d.model,
                     "page_key": d.page_key} for d in rows])
        return
    console = out_console()
    if not rows:
        console.print("No drafts waiting for review." if not all_ else "No plans yet: run `kompl compile`.")
        return
    from rich.table import Table

    table = Table("plan", "action", "type", "title", "status", "sources", "model")
    for d in rows:
        table.add_row(str(d.plan_id), d.action, d.page_type, esc(d.title), d.status,
                      f"{len(d.new_sources)} new / {len(d.sources)}", esc(d.model or ""))
    console.print(table)
    console.print("See one with `kompl diff PLAN_ID`; then `kompl approve PLAN_ID` or `kompl reject PLAN_ID --reason R`.")


def diff(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="A plan id, or a page (id, slug, key or title) with --from/--to.")],
    from_version: Annotated[int | None, typer.Option("--from", help="Page version to compare from (default: the previous one).")] = None,
    to_version: Annotated[int | None, typer.Option("--to", help="Page version to compare to (default: the current one).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print {\"target\", \"diff\"} as JSON.")] = False,
) -> None:
    """Show what a draft would change, or what changed between two versions of a page.

    A number names a plan when that plan exists; anything else (or --from/--to) names a page.

    Examples:

        kompl diff 12

        kompl diff "Alexander Fleming" --from 1 --to 2
    """
    from kompl.pipeline.plan import get_plan
    from kompl.review import diff as plan_diff
    from kompl.review import page_diff

    _ws, conn = open_workspace(ctx)
    with closing(conn):
        is_plan = (target.isdigit() and from_version is None and to_version is None
                   and get_plan(conn, int(target)) is not None)
        text = plan_diff(conn, int(target)) if is_plan else page_diff(conn, target, from_version, to_version)
    if json_out:
        print_json({"target": target, "kind": "plan" if is_plan else "page", "diff": text})
        return
    if not text:
        out_console().print("No differences.")
        return
    from rich.syntax import Syntax

    out_console().print(Syntax(text, "diff", theme="ansi_dark", word_wrap=True))


def approve(
    ctx: typer.Context,
    plan_ids: Annotated[list[int] | None, typer.Argument(help="Plan ids to approve.", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Approve every draft waiting for review.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print {\"approved\", \"noop\", \"stale\", \"failed\", ...} as JSON.")] = False,
) -> None:
    """Commit drafts to the wiki: a new page version, its provenance, links, search and vectors.

    A draft whose page changed since it was planned is not committed: it is re-planned.

    Examples:

        kompl approve 12 13

        kompl approve --all --json
    """
    from kompl.review import ALL
    from kompl.review import approve as run_approve

    if not plan_ids and not all_:
        err_console().print("[bold red]error:[/] name the plans to approve, or pass --all")
        raise typer.Exit(2)
    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run_approve(ws, conn, ALL if all_ else plan_ids)
    if json_out:
        print_json(report.to_dict())
    else:
        console = out_console()
        for a in report.approved:
            console.print(f"approved {a['plan_id']}: {esc(a['title'])} (version {a['version']})")
        for n in report.noop:
            console.print(f"no change {n['plan_id']}: {esc(n['title'])} already says this")
        for s in report.stale:
            console.print(f"stale {s['plan_id']}: the page changed since it was drafted; re-planned as "
                          f"{s['replanned'] or 'nothing new'} (draft it with `kompl compile`)")
        if report.linked:
            console.print(f"{len(report.linked)} older page(s) gained links to the new pages.")
        if not (report.approved or report.noop or report.stale or report.failed):
            console.print("No drafts to approve.")
    for f in report.failed:
        err_console().print(f"[bold red]failed {f['plan_id']}:[/] {esc(f['error'])}")
    if report.failed:
        raise typer.Exit(EXIT_FAILURES)


def reject(
    ctx: typer.Context,
    plan_ids: Annotated[list[int], typer.Argument(help="Plan ids to reject.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the tombstone).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print {\"rejected\", \"failed\"} as JSON.")] = False,
) -> None:
    """Reject drafts; the same draft is not proposed again until its inputs change.

    Example:

        kompl reject 12 --reason "summary misses the main finding"
    """
    from kompl.review import reject as run_reject

    _ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run_reject(conn, plan_ids, reason)
    if json_out:
        print_json(report.to_dict())
    else:
        for r in report.rejected:
            out_console().print(f"rejected {r['plan_id']}: {esc(r['title'])}")
    for f in report.failed:
        err_console().print(f"[bold red]failed {f['plan_id']}:[/] {esc(f['error'])}")
    if report.failed:
        raise typer.Exit(EXIT_FAILURES)
