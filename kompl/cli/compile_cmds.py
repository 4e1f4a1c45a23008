"""`kompl compile`: turn pending sources into drafts in the outbox (or pages, with auto_approve)."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import err_console, esc, finish, open_workspace, out_console


class _StageProgress:
    """One progress line per stage, fed by the compile events."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.task = None
        self.stage = ""

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.fields[stage]:<9}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"), console=err_console())
        self.bar.__enter__()
        return self.on_event

    def on_event(self, event: str, info: dict) -> None:
        if event == "stage":
            self._finish()
            self.stage = info["name"]
            self.task = self.bar.add_task("", total=None, stage=self.stage)
        elif event == "start" and self.task is not None:
            self.bar.update(self.task, total=info.get("total") or 0)
        elif event in ("source", "plan", "item") and self.task is not None:
            label = info.get("title") or info.get("source_id") or ""
            self.bar.update(self.task, advance=1, description=esc(str(label))[:40])

    def _finish(self) -> None:
        """Close the current stage's line: full, whether or not it reported a total."""
        if self.task is not None:
            done = self.bar.tasks[-1].completed
            self.bar.update(self.task, total=max(done, 1), completed=max(done, 1), description="done")

    def __exit__(self, *exc):
        if self.bar is not None:
            self._finish()
            self.bar.__exit__(*exc)
        return False


def compile_(
    ctx: typer.Context,
    source: Annotated[Optional[list[str]], typer.Option("--source", help="Only this source (repeatable).")] = None,
    model: Annotated[Optional[str], typer.Option(help="Model for every model call of this run (any litellm model string).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object: sources, plans, drafted, failed, llm_calls.")] = False,
) -> None:
    """Compile pending sources into page drafts: extract → resolve → conflicts → plan → draft.

    Drafts wait in the outbox for review (`kompl drafts`, `kompl diff`, `kompl approve`,
    `kompl reject`); with `auto_approve = true` in kompl.toml they are committed at once.
    Running it again over unchanged sources does nothing and makes no model call. A page
    whose drafting fails stays pending and is tried again next time (see `kompl status`).

    Examples:

        kompl compile

        kompl compile --source src-0123456789ab --model anthropic/claude-sonnet-4-5 --json
    """
    from kompl.pipeline.compile import compile_workspace

    ws, conn = open_workspace(ctx)
    with closing(conn):
        with _StageProgress(enabled=not json_out) as on_progress:
            report = compile_workspace(ws, conn, model=model, source_ids=source or None, on_progress=on_progress)
    finish(report, json_out, lambda r: _summary(r, auto=ws.settings.auto_approve))


def _summary(report, *, auto: bool) -> None:
    console = out_console()
    ex, rs = report.stages.get("extract", {}), report.stages.get("resolve", {})
    console.print(f"model: {esc(report.model)}")
    console.print(f"extract:   {len(ex.get('extracted', []))} source(s) extracted, {ex.get('up_to_date', 0)} up to date")
    console.print(f"resolve:   {rs.get('new_names', 0)} new name(s), {rs.get('entities_merged', 0)} merged, "
                  f"{rs.get('pending', 0)} waiting for review")
    console.print(f"plan:      {report.plans} new plan(s)")
    console.print(f"draft:     {report.drafted} drafted")
    if report.approved is not None:
        console.print(f"approve:   {report.approved} committed (auto_approve)")
    console.print(f"{report.llm_calls} model call(s) in {report.seconds:.1f} s")
    err = err_console()
    for fail in report.failed:
        what = fail.get("title") or fail.get("source_id") or fail.get("plan_id") or ""
        err.print(f"[bold red]failed[/] {fail['stage']} {esc(what)}: {esc(fail.get('error', ''))}")
    if report.failed:
        err.print("Failed work stays pending: run `kompl compile` again (see `kompl status`).")
    elif report.drafted and not auto:
        console.print("Review with [bold]kompl drafts[/], then [bold]kompl approve --all[/] (or approve/reject by id).")
