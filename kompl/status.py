"""What a workspace holds and what work is pending (read-only)."""

from __future__ import annotations

import sqlite3

from kompl.ingest import store
from kompl.workspace import Workspace


def workspace_status(ws: Workspace, conn: sqlite3.Connection) -> dict:
    """Counts by state, and the work a `kompl compile` would do next (with its errors)."""
    from kompl.pipeline.extract import pending_sources

    counts = store.counts_by_status(conn)
    sources = {"active": counts.get("active", 0), "archived": counts.get("archived", 0)}
    sources["total"] = sum(sources.values())
    to_extract, _up_to_date, _skipped = pending_sources(conn, ws.settings.model)
    plans = {r[0]: r[1] for r in conn.execute("SELECT status, COUNT(*) FROM page_plans GROUP BY status")}
    failed_plans = [
        {"plan_id": r[0], "title": r[1], "error": r[2], "attempts": r[3]}
        for r in conn.execute(
            "SELECT plan_id, title, error, attempts FROM page_plans WHERE status = 'failed' ORDER BY plan_id")
    ]
    pages = conn.execute("SELECT COUNT(*) FROM pages WHERE status = 'active'").fetchone()[0]
    pending_aliases = conn.execute("SELECT COUNT(*) FROM aliases WHERE status = 'pending'").fetchone()[0]
    return {
        "workspace": str(ws.root),
        "model": ws.settings.model,
        "sources": sources,
        "pages": pages,
        "failed_inputs": len(store.open_failures(conn)),
        "pending": {
            "to_extract": len(to_extract),
            "to_draft": plans.get("planned", 0) + plans.get("failed", 0),
            "drafts_to_review": plans.get("drafted", 0),
            "aliases_to_review": pending_aliases,
        },
        "failed_drafts": failed_plans,
    }
