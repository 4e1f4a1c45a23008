"""`kompl doctor`: find (and with fix, repair) where files and vectors drifted from the database.

SQLite is the truth; page files, the vector index and raw source files are
projections of it. `check()` compares them:

- pages: a page file missing, stale (an older version) or edited by hand
  (taken in as a human-authored version, never overwritten) — wiki.store.reconcile_files;
- vectors: pages without vectors, with vectors of an older version, vectors of
  deleted pages, vectors from another embedder — vectors.reconcile;
- sources: raw/original files no row refers to (a crash between file and row;
  removed by ingest.store.reconcile) and rows whose raw file is gone (reported
  only: a row is never deleted here; re-ingest the original to restore it).

`repair_on_start()` is the cheap part for the start of every command: page files
only, no chromadb import.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from kompl.errors import EXIT_FAILURES, EXIT_OK
from kompl.workspace import Workspace

_REPAIRABLE = {"missing_file", "stale_file", "edited_by_hand", "missing_vectors", "stale_vectors",
               "orphaned_vectors", "embedder_changed", "orphan_raw_file", "orphan_original_file"}


@dataclass
class DoctorReport:
    findings: list[dict] = field(default_factory=list)  # {area, problem, page_id|source_id|path, message, fixed}
    fix: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return len(self.findings)

    @property
    def remaining(self) -> list[dict]:
        return [f for f in self.findings if not f["fixed"]]

    @property
    def exit_code(self) -> int:
        """0: clean, or every problem fixed; 1: problems remain."""
        return EXIT_OK if not self.remaining else EXIT_FAILURES

    def to_dict(self) -> dict[str, Any]:
        return {"ok": not self.remaining, "fix": self.fix, "problems": self.problems,
                "fixed": sum(1 for f in self.findings if f["fixed"]), "remaining": len(self.remaining),
                "findings": self.findings, "notes": self.notes}

    def add(self, area: str, problem: str, message: str, fixed: bool, **ids: Any) -> None:
        self.findings.append({"area": area, "problem": problem, **ids, "message": message, "fixed": fixed})


def repair_on_start(ws: Workspace, conn: sqlite3.Connection) -> list[dict]:
    """Rewrite missing/stale page files and take in hand edits.

    Cheap: the vector store is opened only when a hand edit was taken in (its new
    version must be searchable as it now reads).
    """
    if conn.execute("SELECT 1 FROM pages WHERE status = 'active' LIMIT 1").fetchone() is None:
        return []
    from kompl.wiki import store

    findings = store.reconcile_files(ws, conn, fix=True)
    adopted = sorted({f["page_id"] for f in findings if f["problem"] == "edited_by_hand"})
    if adopted:
        from kompl import vectors

        vectors.sync_pages(ws, conn, adopted)
    return findings


def check(ws: Workspace, conn: sqlite3.Connection, *, fix: bool = False, vectors: bool = True) -> DoctorReport:
    """Find drift between the database and its projections; with `fix`, repair what is safe."""
    report = DoctorReport(fix=fix)
    _check_pages(ws, conn, report, fix)
    if vectors:
        _check_vectors(ws, conn, report, fix)
    _check_sources(ws, conn, report, fix)
    return report


_PAGE_MESSAGES = {
    "missing_file": "page file is missing",
    "stale_file": "page file holds an older version",
    "edited_by_hand": "page file was edited by hand",
}


def _check_pages(ws: Workspace, conn: sqlite3.Connection, report: DoctorReport, fix: bool) -> None:
    from kompl.wiki import store

    for item in store.reconcile_files(ws, conn, fix=fix):
        message = _PAGE_MESSAGES.get(item["problem"], item["problem"])
        if fix:
            message += " (taken in as a human version)" if item["problem"] == "edited_by_hand" else " (rewritten)"
        report.add("pages", item["problem"], f"{item['slug']}.md: {message}", fix,
                   page_id=item["page_id"], slug=item["slug"])


def _check_vectors(ws: Workspace, conn: sqlite3.Connection, report: DoctorReport, fix: bool) -> None:
    from kompl import vectors

    found = vectors.reconcile(ws, conn, fix=fix)
    done = fix and found.get("fixed", False)
    if found.get("deferred"):
        report.notes.append("another process is writing the vector store; vector repairs were deferred "
                            "(run `kompl doctor --fix` again)")
    if found.get("embedder_changed"):
        report.add("vectors", "embedder_changed",
                   f"the vector index was built with another embedder than {ws.settings.embedder!r}"
                   + (" (rebuilt)" if done else ""), done)
        stale_msg = "vectors from the previous embedder"
    else:
        stale_msg = "vectors of an older version"
    for pid in found["missing"]:
        report.add("vectors", "missing_vectors", f"page {pid} has no vectors" + (" (embedded)" if done else ""),
                   done, page_id=pid)
    for pid in found["stale"]:
        report.add("vectors", "stale_vectors", f"page {pid} has {stale_msg}" + (" (re-embedded)" if done else ""),
                   done, page_id=pid)
    for pid in found["orphaned"]:
        report.add("vectors", "orphaned_vectors", f"vectors of page {pid}, which is deleted or unknown"
                   + (" (removed)" if done else ""), done, page_id=pid)


def _check_sources(ws: Workspace, conn: sqlite3.Connection, report: DoctorReport, fix: bool) -> None:
    from kompl.ingest import store as sources

    with sources.ingest_lock(ws):
        rows = conn.execute("SELECT source_id, original_name FROM sources").fetchall()
        ids = {r[0] for r in rows}
        originals = {r[1] for r in rows if r[1]}
        orphan_raw = sorted(p.name for p in ws.raw_dir.glob("*.md.gz") if p.name[: -len(".md.gz")] not in ids) \
            if ws.raw_dir.exists() else []
        orphan_orig = sorted(p.name for p in ws.originals_dir.iterdir()
                             if p.is_file() and p.name not in originals and not p.name.startswith(".")) \
            if ws.originals_dir.exists() else []
        no_raw = sorted(sid for sid in ids if not sources.raw_path(ws, sid).exists())
    if fix and (orphan_raw or orphan_orig):
        sources.reconcile(ws, conn)  # removes exactly such files, under the ingest lock
    for name in orphan_raw:
        report.add("sources", "orphan_raw_file", f"data/raw/{name} belongs to no source" + (" (removed)" if fix else ""),
                   fix, path=f"data/raw/{name}")
    for name in orphan_orig:
        report.add("sources", "orphan_original_file",
                   f"data/originals/{name} belongs to no source" + (" (removed)" if fix else ""),
                   fix, path=f"data/originals/{name}")
    for sid in no_raw:
        report.add("sources", "missing_raw_file",
                   f"source {sid} has no raw file (data/raw/{sid}.md.gz); re-ingest its original to restore it",
                   False, source_id=sid)


__all__ = ["DoctorReport", "check", "repair_on_start"]
