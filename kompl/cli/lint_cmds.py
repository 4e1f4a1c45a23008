"""`kompl lint`: check the wiki (from cron with --if-due), repair what is safe with --fix, replay with --last."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import esc, open_workspace, out_console, print_json
from kompl.errors import EXIT_OK

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def lint(
    ctx: typer.Context,
    if_due: Annotated[bool, typer.Option("--if-due", help="Run only when the last complete lint is older than lint_interval_hours (for cron).")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what is safe: relink, rebuild files, full-text rows and vectors. Never deletes content.")] = False,
    last: Annotated[bool, typer.Option("--last", help="Show the latest stored run without running.")] = False,
    check: Annotated[Optional[list[str]], typer.Option("--check", help="Run only this check (repeatable); such a run does not count for --if-due.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model that judges new claim pairs (any litellm model string).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: findings, checked_at, counts.")] = False,
) -> None:
    """Check the wiki: broken links, orphans, provenance, stale pages, duplicates, frontmatter, drift, contradictions.

    Findings are stored; `--last` shows the latest run again. Exit code: 0 clean
    (info findings only), 1 warnings or errors found, 2 a check could not run.
    For cron, `--if-due` runs only when the last complete lint is older than
    `lint_interval_hours` (default 36) and otherwise says why it skipped (exit 0).

    Examples:

        kompl lint

        kompl lint --fix --json

        0 * * * * cd /path/to/wiki && kompl lint --if-due >> lint.log 2>&1
    """
    from kompl import lint as service

    ws, conn = open_workspace(ctx, repair=False)
    with closing(conn):
        if last:
            report = service.require_last_run(conn)
        else:
            if if_due:
                is_due, why, facts = service.due(ws, conn)
                if not is_due:
                    if json_out:
                        print_json({"skipped": True, "reason": why, **facts})
                    else:
                        out_console().print(f"lint skipped: {esc(why)}", soft_wrap=True)
                    raise typer.Exit(EXIT_OK)
            report = service.run_lint(ws, conn, fix=fix, model=model, checks=check)
    if json_out:
        print_json(report.to_dict())
    else:
        _render(report, replay=last)
    raise typer.Exit(report.exit_code)


def _render(report, *, replay: bool) -> None:
    from rich.table import Table

    console = out_console()
    when = f"run {report.run_id}, {report.checked_at}" + (" (stored)" if replay else "")
    counts = report.counts
    if report.findings:
        table = Table(title=f"kompl lint — {when}", show_lines=False, expand=False)
        table.add_column("check", no_wrap=True)
        table.add_column("sev", no_wrap=True)
        table.add_column("page")
        table.add_column("finding")
        by_check: dict[str, list[dict]] = {}
        for finding in report.findings:
            by_check.setdefault(finding["check"], []).append(finding)
        for name in sorted(by_check, key=lambda c: (min(_rank(f) for f in by_check[c]), c)):
            for i, f in enumerate(sorted(by_check[name], key=_rank)):
                style = _SEVERITY_STYLE[f["severity"]]
                page = f["page_title"] or ("" if f["page_id"] is None else f"#{f['page_id']}")
                message = esc(f["message"])  # a fixed finding's message says what was done
                if f["check"] == "contradiction":
                    d = f["details"]
                    message = (f"{esc(d.get('topic') or '')}\n"
                               f"A [cyan]{esc(d['a']['source_title'])}[/] [dim]{d['a']['source_id']}[/]: “{esc(_one_line(d['a']['quote'] or d['a']['claim']))}”\n"
                               f"B [cyan]{esc(d['b']['source_title'])}[/] [dim]{d['b']['source_id']}[/]: “{esc(_one_line(d['b']['quote'] or d['b']['claim']))}”\n"
                               f"[dim]{'covered by a comparison page' if d.get('covered') else 'no comparison page yet'}; "
                               f"{esc(d.get('reason') or '')}[/]")
                table.add_row(name if i == 0 else "", f"[{style}]{f['severity']}[/]", esc(page), message)
            table.add_section()
        console.print(table)
    sev = counts["by_severity"]
    summary = (f"{counts['remaining']} finding(s): {sev['error']} error(s), {sev['warning']} warning(s), "
               f"{sev['info']} info")
    if counts["fixed"]:
        summary += f"; {counts['fixed']} fixed"
    checked = report.checked
    console.print(f"{summary}. Checked {checked.get('pages', 0)} pages, {checked.get('links', 0)} links, "
                  f"{checked.get('claim_pairs', 0)} claim pairs ({checked.get('pairs_judged', 0)} newly judged) "
                  f"— {when}.", soft_wrap=True)
    for error in report.errors:
        console.print(f"[bold red]could not check:[/] {esc(error)}", soft_wrap=True)
    if not report.fix and any(f["check"] in ("drift", "broken_link") and not f["fixed"] for f in report.findings):
        console.print("Run `kompl lint --fix` to repair drift and relink links whose target now exists.")


def _rank(finding: dict) -> int:
    return ("error", "warning", "info").index(finding["severity"])


def _one_line(text: str) -> str:
    return " ".join((text or "").split())
