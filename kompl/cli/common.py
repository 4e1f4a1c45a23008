"""Shared CLI plumbing: the error-to-exit-code group, workspace opening, output helpers."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
import typer
from typer.core import TyperGroup

from kompl.errors import EXIT_ERROR, KomplError


class KomplGroup(TyperGroup):
    """Turns every KomplError into one message on stderr and its exit code.

    Ctrl-C ends quietly with 130. KOMPL_DEBUG=1 re-raises for a traceback.
    """

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


def open_workspace(ctx: typer.Context):
    """(workspace, connection) for the workspace this command runs in."""
    from kompl import db
    from kompl.workspace import find_workspace

    ws = find_workspace(home_of(ctx))
    return ws, db.connect(ws.db_path)


def esc(text: Any) -> str:
    from rich.markup import escape

    return escape(str(text))


__all__ = ["EXIT_ERROR", "KomplGroup", "error", "esc", "home_of", "open_workspace", "print_json"]
