"""`kompl stats`: model calls, tokens and cost by purpose and by model."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import esc, open_workspace, out_console, print_json


def stats(
    ctx: typer.Context,
    since: Annotated[Optional[str], typer.Option("--since", help="Only calls at or after this UTC date/time (ISO, e.g. 2025-01-31).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON.")] = False,
) -> None:
    """Show model calls, tokens and cost by purpose and by model (every attempt counts).

    `calls` counts attempts sent to a model, the offline one included; `failed`
    are those that errored or gave invalid output; `refused` are calls the daily
    budget stopped before they were sent.

    Example:

        kompl stats --since 2025-01-31 --json
    """
    from kompl import llm

    ws, conn = open_workspace(ctx)
    with closing(conn):
        info = llm.call_stats(ws, conn, since=since)
    if json_out:
        print_json(info)
        return
    from rich.table import Table

    console = out_console()
    if not info["by_model"]:
        console.print("No model calls recorded" + (f" since {esc(since)}." if since else " yet."))
    for title, key in (("By purpose", "by_purpose"), ("By model", "by_model")):
        if not info[key]:
            continue
        table = Table(title=title, title_justify="left")
        table.add_column(title.split()[-1])
        for column in ("calls", "failed", "refused", "prompt tokens", "completion tokens", "cost (USD)"):
            table.add_column(column, justify="right")
        groups = list(info[key].items())
        for index, (name, row) in enumerate(groups + [("total", info["total"])]):
            table.add_row(
                esc(name),
                str(row["calls"]),
                str(row["failed"]),
                str(row["refused"]),
                f"{row['prompt_tokens']:,}",
                f"{row['completion_tokens']:,}",
                f"{row['cost_usd']:.4f}",
                end_section=index == len(groups) - 1,
            )
        console.print(table)
    budget = info["budget"]
    cap = f"${budget['daily_budget_usd']:.2f}" if budget["daily_budget_usd"] > 0 else "no cap"
    console.print(f"Spent today (UTC): ${budget['spent_today_usd']:.4f} (daily budget: {cap})")
