"""`kompl doctor` and `kompl conflicts`: repair drift between the database and its files/vectors; list contradictions."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer

from kompl.cli.common import esc, open_workspace, out_console, print_json


def doctor(
    ctx: typer.Context,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what was found (files, vectors, orphan source files).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with the findings.")] = False,
) -> None:
    """Check that page files, vectors and source files match the database; --fix repairs them.

    A page file edited by hand is taken in as a new human-authored version, never
    overwritten. Source rows are never deleted. Exit code: 0 clean (or all fixed),
    1 problems remain, 2 error.

    Examples:

        kompl doctor

        kompl doctor --fix --json
    """
    from kompl import doctor as service

    ws, conn = open_workspace(ctx, repair=False)
    with closing(conn):
        report = service.check(ws, conn, fix=fix)
    if json_out:
        print_json(report.to_dict())
    else:
        console = out_console()
        for finding in report.findings:
            mark = "[green]fixed[/]" if finding["fixed"] else "[yellow]found[/]"
            console.print(f"{mark} {finding['area']}: {esc(finding['message'])}")
        for note in report.notes:
            console.print(f"[yellow]note:[/] {esc(note)}")
        if not report.findings:
            console.print("All clean: page files, vectors and source files match the database.")
        elif report.remaining:
            hint = "run `kompl doctor --fix` to repair" if not fix else "some problems need you (see above)"
            console.print(f"{len(report.remaining)} problem(s) remain; {hint}.")
        else:
            console.print(f"Repaired {report.problems} problem(s).")
    raise typer.Exit(report.exit_code)


def conflicts(
    ctx: typer.Context,
    all_verdicts: Annotated[bool, typer.Option("--all", help="Also list pairs judged unsure or compatible.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array of the conflicts.")] = False,
) -> None:
    """List contradicting claims across sources, with both claims, quotes and sources.

    Conflicts are found by `kompl compile` (claims about the same entity from
    different sources, filtered locally and judged by the model). Only pairs whose
    two sources are active are shown.

    Examples:

        kompl conflicts

        kompl conflicts --all --json
    """
    from kompl.pipeline.conflicts import list_conflicts

    _ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = list_conflicts(conn, verdict=None if all_verdicts else "contradicts")
    if json_out:
        print_json(rows)
        return
    console = out_console()
    if not rows:
        console.print("No conflicts found." if not all_verdicts else "No judged claim pairs yet.")
        return
    for row in rows:
        console.print(f"[bold]#{row['conflict_id']} {esc(row['topic'] or '(no topic)')}[/] — {row['verdict']} "
                      f"({row['confidence']:.2f}, {esc(row['model'])})")
        for side in ("a", "b"):
            s = row[side]
            console.print(f"  [cyan]{esc(s['source_title'])}[/] [dim]{s['source_id']}[/]")
            console.print(f"    {esc(s['claim'])}")
            quote = " ".join(s["quote"].split())
            if quote and quote != " ".join(s["claim"].split()):
                console.print(f"    [dim]“{esc(quote)}”[/]")
        console.print(f"  [dim]why: {esc(row['reason'])}[/]")
