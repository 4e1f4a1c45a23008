"""What a workspace holds and what work is pending (read-only)."""

from __future__ import annotations

import sqlite3

from kompl.ingest import store
from kompl.workspace import Workspace


def workspace_status(ws: Workspace, conn: sqlite3.Connection) -> dict:
    counts = store.counts_by_status(conn)
    sources = {"active": counts.get("active", 0), "archived": counts.get("archived", 0)}
    sources["total"] = sum(sources.values())
    return {
        "workspace": str(ws.root),
        "model": ws.settings.model,
        "sources": sources,
        "failed_inputs": len(store.open_failures(conn)),
        "pending": {},
    }
