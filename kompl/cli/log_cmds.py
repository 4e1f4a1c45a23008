"""`kompl log`: the audit log — every change to the workspace, with what, when, who and why.

The rows come from `kompl.db.activity`; `query_log` filters them (several
actions, a date or a relative age, the latest N) and `summarize` turns a row's
details into one line. Both are plain functions with no terminal output.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Optional

import typer

from kompl.cli.common import esc, open_workspace, out_console, print_json
from kompl.errors import KomplError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$", re.IGNORECASE)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, *, now: datetime | None = None) -> str:
    """A date, a date-time (ISO 8601; UTC unless it says otherwise) or an age (30m, 12h, 7d, 2w) -> the UTC
    timestamp text the log stores, so that it compares as text."""
    match = _AGE.match(text)
    if match:
        moment = (now or datetime.now(timezone.utc)) - timedelta(**{_UNITS[match.group(2).lower()]: float(match.group(1))})
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise KomplError(f"--since {text!r} is not a date, a date-time or an age",
                             hint="use e.g. 2025-01-31, 2025-01-31T14:00, 12h, 7d or 2w") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def query_log(conn: sqlite3.Connection, *, since: str | None = None, actions: list[str] | None = None,
              limit: int | None = None) -> list[dict]:
    """Audit rows oldest first: `actions` (any of them), at or after `since`, the latest `limit`."""
    from kompl import db

    wanted = [a.strip() for item in (actions or []) for a in item.split(",") if a.strip()]
    rows = db.activity(conn, action=wanted[0] if len(wanted) == 1 else None, since=since)
    if len(wanted) > 1:
        rows = [r for r in rows if r["action"] in set(wanted)]
    if limit is not None and limit >= 0:
        rows = rows[-limit:] if limit else []
    return [{"id": r["id"], "action": r["action"], "at": r["at"], "target": r["target"], "actor": r["actor"],
             "details": r["details"]} for r in rows]


def known_actions(conn: sqlite3.Connection) -> list[str]:
    from kompl import db

    return sorted({r["action"] for r in db.activity(conn)})


def summarize(details: Any, width: int = 160) -> str:
    """One line for a row's details: `key=value` pairs, long lists shortened to their size."""
    if not isinstance(details, dict):
        return str(details)[:width]
    parts = []
    for key, value in details.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, list):
            text = ",".join(map(str, value)) if len(value) <= 3 else f"[{len(value)} items]"
        elif isinstance(value, dict):
            text = "{" + ", ".join(f"{k}: {v}" for k, v in list(value.items())[:4]) + ("…}" if len(value) > 4 else "}")
        else:
            text = " ".join(str(value).split())
        parts.append(f"{key}={text}")
    line = "  ".join(parts)
    return line if len(line) <= width else line[: width - 1] + "…"


def log(
    ctx: typer.Context,
    since: Annotated[Optional[str], typer.Option("--since", help="Only entries at or after this date, date-time (UTC) or age (12h, 7d, 2w).")] = None,
    action: Annotated[Optional[list[str]], typer.Option("--action", help="Only this action (repeatable, or comma-separated): ingest, extract, plan, draft, approve, reject, lint, ...")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=0, help="Only the latest N entries.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array of {action, at, target, actor, details}.")] = False,
) -> None:
    """Show the audit log: every change to the workspace (ingest, compile stages, approve, reject, lint, ...).

    Entries are listed oldest first, with the time (UTC), the action, what it
    changed, who did it (a person, a model or kompl) and the details it recorded.

    Examples:

        kompl log --limit 20

        kompl log --action approve --action reject --since 7d

        kompl log --since 2025-01-31 --json
    """
    _ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = query_log(conn, since=parse_since(since) if since else None, actions=action, limit=limit)
        present = known_actions(conn) if not rows and action else []
    if json_out:
        print_json(rows)
        return
    console = out_console()
    if not rows:
        hint = f" (actions in this log: {', '.join(present)})" if present else ""
        console.print(f"No log entries match.{esc(hint)}", soft_wrap=True)
        return
    # One line per entry and its details below it: a table cannot fit ids and details in 80 columns.
    for row in rows:
        actor = row["actor"].split(" (")[0]
        console.print(f"[dim]{row['at'][:19].replace('T', ' ')}[/] [bold]{esc(row['action'])}[/] "
                      f"{esc(row['target'] or '')} [dim]by {esc(actor)}[/]", soft_wrap=True)
        line = summarize(row["details"])
        if line:
            console.print(f"    [dim]{esc(line)}[/]", soft_wrap=True)
