"""`kompl compile`: extract → resolve → conflicts → plan → draft (→ approve when auto_approve).

Runs the stages in order over one gateway, so every model call of the run is
counted together. Each stage is idempotent: a second compile over unchanged
sources does nothing and makes zero model calls. Progress events are passed
on as ("stage", {"name"}) followed by that stage's own events.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kompl.pipeline import StageResult
from kompl.workspace import Workspace

ProgressFn = Callable[[str, dict], None]
STAGES = ("extract", "resolve", "conflicts", "plan", "draft", "approve")


@dataclass
class CompileReport(StageResult):
    model: str
    stages: dict[str, dict] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    plans: int = 0
    drafted: int = 0
    failed: list[dict] = field(default_factory=list)
    llm_calls: int = 0
    approved: int | None = None
    seconds: float = 0.0


def _as_dict(report: Any) -> dict:
    return report.to_dict() if hasattr(report, "to_dict") else dict(report or {})


def _last_call_id(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT COALESCE(MAX(id), 0) FROM llm_calls").fetchone()[0]


def compile_workspace(
    ws: Workspace, conn: sqlite3.Connection, *, model: str | None = None,
    source_ids: list[str] | None = None, on_progress: ProgressFn | None = None,
) -> CompileReport:
    from kompl.llm import Gateway
    from kompl.pipeline import conflicts, draft, plan, resolve
    from kompl.pipeline.extract import extract_pending

    started = time.perf_counter()
    emit = on_progress or (lambda _event, _info: None)
    gw = Gateway(ws, conn, model=model)
    report = CompileReport(model=gw.model)
    first_call = _last_call_id(conn)

    emit("stage", {"name": "extract"})
    ex = extract_pending(ws, conn, source_ids=source_ids, gateway=gw, on_progress=emit)
    report.stages["extract"] = _as_dict(ex)
    report.sources = [row["source_id"] for row in ex.extracted]
    report.failed += [{"stage": "extract", **f} for f in ex.failed]

    emit("stage", {"name": "resolve"})
    rs = resolve.resolve(ws, conn, gateway=gw)
    report.stages["resolve"] = _as_dict(rs)
    report.failed += [{"stage": "resolve", "error": e} for e in rs.model_errors]

    emit("stage", {"name": "conflicts"})
    cf = conflicts.find_conflicts(ws, conn, gateway=gw)
    report.stages["conflicts"] = _as_dict(cf)
    report.failed += [{"stage": "conflicts", "error": e} for e in getattr(cf, "errors", [])]

    emit("stage", {"name": "plan"})
    pl = plan.plan_pending(ws, conn, source_ids=source_ids)
    report.stages["plan"] = _as_dict(pl)
    report.plans = len(getattr(pl, "created", []) or [])

    emit("stage", {"name": "draft"})
    dr = draft.draft_pending(ws, conn, gateway=gw, on_progress=emit)
    report.stages["draft"] = _as_dict(dr)
    report.drafted = len(getattr(dr, "drafted", []) or [])
    report.failed += [{"stage": "draft", **f} for f in getattr(dr, "failed", [])]

    if ws.settings.auto_approve:
        from kompl import review

        emit("stage", {"name": "approve"})
        ap = review.approve_all_if_auto(ws, conn)
        report.stages["approve"] = _as_dict(ap)
        report.approved = len(getattr(ap, "approved", []) or [])
        report.failed += [{"stage": "approve", **f} for f in getattr(ap, "failed", [])]

    report.llm_calls = _last_call_id(conn) - first_call
    report.seconds = time.perf_counter() - started
    return report
