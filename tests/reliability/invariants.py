"""The workspace invariants every crash trial and concurrent run must leave behind.

`check_invariants(root)` returns a list of violations (empty: all hold):

- no duplicated source (content hash) or page (page_key, slug);
- every source row has its raw file (and original), and no raw file or original
  lacks a row; no half-written temporary file is left among them;
- page files, vectors and source files agree with the database
  (`kompl.doctor.check(fix=False)` finds nothing), and the FTS index holds exactly
  one row per active page, with its current title;
- every active page's current version exists and matches its content hash;
- no draft committed twice (a plan_id appears in page_versions at most once), no
  approved plan without its version, no plan still waiting whose version is
  already committed;
- the audit log records the commands that completed (`completed`: actions that
  must appear after activity id `since`).

`signature(root)` is what "nothing lost, nothing duplicated" compares against a
fault-free reference run: the source hashes and the active page keys.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path


def _conn(root: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(Path(root) / "data" / "kompl.db", timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def signature(root: Path) -> dict:
    conn = _conn(root)
    try:
        return {
            "sources": sorted(r[0] for r in conn.execute("SELECT content_hash FROM sources")),
            "pages": sorted(r[0] for r in conn.execute("SELECT page_key FROM pages WHERE status = 'active'")),
        }
    finally:
        conn.close()


def last_activity_id(root: Path) -> int:
    conn = _conn(root)
    try:
        return conn.execute("SELECT COALESCE(MAX(id), 0) FROM activity").fetchone()[0]
    finally:
        conn.close()


def actions_since(root: Path, since: int) -> set[str]:
    conn = _conn(root)
    try:
        return {r[0] for r in conn.execute("SELECT DISTINCT action FROM activity WHERE id > ?", (since,))}
    finally:
        conn.close()


def check_invariants(root: Path, *, completed: Iterable[str] = (), since: int = 0, vectors: bool = True) -> list[str]:
    """Every violation of the invariants in the workspace at `root` (see the module docstring)."""
    root = Path(root)
    problems: list[str] = []
    conn = _conn(root)
    try:
        _database(conn, problems)
        _source_files(root, conn, problems)
        have = {r[0] for r in conn.execute("SELECT DISTINCT action FROM activity WHERE id > ?", (since,))}
        for action in completed:
            if action not in have:
                problems.append(f"audit: no {action!r} activity row after id {since}")
    finally:
        conn.close()
    problems += _doctor(root, vectors)
    return problems


def _rows(conn: sqlite3.Connection, sql: str) -> list:
    return conn.execute(sql).fetchall()


def _database(conn: sqlite3.Connection, problems: list[str]) -> None:
    checks = {
        "duplicated source content": "SELECT content_hash FROM sources GROUP BY content_hash HAVING COUNT(*) > 1",
        "duplicated page_key": "SELECT page_key FROM pages GROUP BY page_key HAVING COUNT(*) > 1",
        "duplicated slug": "SELECT slug FROM pages GROUP BY slug HAVING COUNT(*) > 1",
        "draft committed twice": "SELECT plan_id FROM page_versions WHERE plan_id IS NOT NULL"
                                 " GROUP BY plan_id HAVING COUNT(*) > 1",
        "approved plan without its version": "SELECT plan_id FROM page_plans WHERE status = 'approved' AND plan_id"
                                             " NOT IN (SELECT plan_id FROM page_versions WHERE plan_id IS NOT NULL)",
        "plan still open but its version is committed": "SELECT plan_id FROM page_plans WHERE status IN"
            " ('planned', 'drafted', 'failed') AND plan_id IN (SELECT plan_id FROM page_versions"
            " WHERE plan_id IS NOT NULL)",
        "active page without its current version": "SELECT p.page_id FROM pages p LEFT JOIN page_versions v ON"
            " v.page_id = p.page_id AND v.version = p.version WHERE p.status = 'active'"
            " AND (v.page_id IS NULL OR v.content_hash != p.content_hash)",
        "active page with no FTS row": "SELECT page_id FROM pages WHERE status = 'active' AND page_id NOT IN"
                                       " (SELECT page_id FROM pages_fts)",
        "FTS row of a deleted or unknown page": "SELECT page_id FROM pages_fts WHERE page_id NOT IN"
                                                " (SELECT page_id FROM pages WHERE status = 'active')",
        "FTS rows duplicated": "SELECT page_id FROM pages_fts GROUP BY page_id HAVING COUNT(*) > 1",
        "FTS title differs from the page": "SELECT f.page_id FROM pages_fts f JOIN pages p ON p.page_id = f.page_id"
                                           " WHERE f.title != p.title",
        "active page cites an unknown source": "SELECT ps.page_id || ':' || ps.source_id FROM page_sources ps"
            " JOIN pages p ON p.page_id = ps.page_id WHERE p.status = 'active'"
            " AND ps.source_id NOT IN (SELECT source_id FROM sources)",
    }
    for what, sql in checks.items():
        found = [str(r[0]) for r in _rows(conn, sql)]
        if found:
            problems.append(f"{what}: {', '.join(found[:10])}")
    integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
    if integrity != "ok":
        problems.append(f"sqlite quick_check: {integrity}")


def _source_files(root: Path, conn: sqlite3.Connection, problems: list[str]) -> None:
    data = root / "data"
    rows = conn.execute("SELECT source_id, original_name FROM sources").fetchall()
    ids = {r[0] for r in rows}
    originals = {r[1] for r in rows if r[1]}
    raw = {p.name[: -len(".md.gz")] for p in (data / "raw").glob("*.md.gz")}
    on_disk = {p.name for p in (data / "originals").iterdir() if p.is_file() and not p.name.startswith(".")}
    if ids - raw:
        problems.append(f"source rows without raw file: {sorted(ids - raw)}")
    if raw - ids:
        problems.append(f"raw files without a source row: {sorted(raw - ids)}")
    if originals - on_disk:
        problems.append(f"source rows without their original: {sorted(originals - on_disk)}")
    if on_disk - originals:
        problems.append(f"originals without a source row: {sorted(on_disk - originals)}")
    temps = [str(p.relative_to(root)) for sub in ("raw", "originals") for p in (data / sub).glob(".*.tmp")]
    if temps:
        problems.append(f"half-written temporary files left: {temps}")


def _doctor(root: Path, vectors: bool) -> list[str]:
    from kompl import db, doctor
    from kompl.workspace import find_workspace

    ws = find_workspace(root)
    conn = db.connect(ws.db_path)
    try:
        report = doctor.check(ws, conn, fix=False, vectors=vectors)
    finally:
        conn.close()
    return [f"doctor: {f['area']}/{f['problem']}: {f['message']}" for f in report.findings] + \
        [f"doctor note: {n}" for n in report.notes]


__all__ = ["actions_since", "check_invariants", "last_activity_id", "signature"]
