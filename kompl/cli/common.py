"""Shared CLI plumbing: the error-to-exit-code group, workspace opening, output helpers."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
import typer
from typer.core import TyperGroup

from kompl.errors import EXIT_ERROR, EXIT_FAILURES, KomplError


class KomplGroup(TyperGroup):
    """Turns every KomplError into one message on stderr and its exit code.

    Ctrl-C ends quietly with 130. KOMPL_DEBUG=1 re-raises for a traceback.
    """

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Commands grouped by their help panel, in registration order, descriptions not cut short.

        Plain click formatting (rich_markup_mode=None) keeps `kompl --help` fast:
        typer's rich renderer alone costs ~0.2 s of start-up.
        """
        sections: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            panel = getattr(cmd, "rich_help_panel", None) or "Commands"
            sections.setdefault(panel, []).append((name, cmd.get_short_help_str(limit=300)))
        for panel, rows in sections.items():
            with formatter.section(panel):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KomplError as exc:
            if os.environ.get("KOMPL_DEBUG"):
                raise
            error(str(exc))
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            if os.environ.get("KOMPL_DEBUG"):
                raise
            error("Interrupted. Work committed so far is kept; run the command again to continue.")
            ctx.exit(130)


def err_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def out_console():
    from rich.console import Console

    return Console(highlight=False)


def error(message: str) -> None:
    from rich.markup import escape

    # soft_wrap: a message and its hint stay whole lines, not cut at 80 columns.
    err_console().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def home_of(ctx: typer.Context) -> str | None:
    root = ctx.find_root()
    return (root.obj or {}).get("home") if root else None


def open_workspace(ctx: typer.Context, *, repair: bool = True):
    """(workspace, connection) for the workspace this command runs in.

    `repair=False` is for the commands that report drift (doctor, lint): they must
    see the problems before anything fixes them.
    """
    from kompl import db
    from kompl.workspace import find_workspace

    ws = find_workspace(home_of(ctx))
    conn = db.connect(ws.db_path)
    if not repair:
        return ws, conn
    try:
        # The database is the truth: page files that a crash left stale or missing are
        # rewritten, and hand edits are taken in as human versions, before any command runs.
        from kompl.doctor import repair_on_start

        repair_on_start(ws, conn)
    except BaseException:
        conn.close()
        raise
    return ws, conn


class ProgressBar:
    """A rich progress bar on stderr fed by a service's progress events (or nothing).

    `advance_on` names the event that finishes one item; `describe` turns that
    event's info into the text shown next to the bar.
    """

    def __init__(self, label: str, *, enabled: bool, advance_on: str, describe):
        self.label, self.enabled, self.advance_on, self.describe = label, enabled, advance_on, describe
        self.bar = None
        self.task = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.description}"), console=err_console(), transient=True)
        self.bar.__enter__()
        return self.on_event

    def on_event(self, event: str, info: dict) -> None:
        if event == "start":
            self.task = self.bar.add_task("", total=info["total"])
        elif event == self.advance_on and self.task is not None:
            self.bar.update(self.task, advance=1, description=esc(str(self.describe(info))[:40]))

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


def finish(report: Any, json_out: bool, summary) -> None:
    """Print a stage report (JSON or the human summary) and exit 1 when it has failures."""
    if json_out:
        print_json(report.to_dict())
    else:
        summary(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILURES)


def esc(text: Any) -> str:
    from rich.markup import escape

    return escape(str(text))


__all__ = ["EXIT_ERROR", "KomplGroup", "ProgressBar", "finish", "error", "esc", "home_of", "open_workspace", "print_json"]
