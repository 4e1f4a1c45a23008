"""The `sources` and `ingest_failures` tables and the raw/original files behind them.

This module owns those tables: other modules read through its functions. A
source's files are written before its row is committed, both under the
workspace's ingest lock, so `reconcile()` (run under the same lock) can remove
files that a crash left without a row, and no row ever lacks its raw file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kompl import db, faults, files
from kompl.workspace import Workspace

SOURCE_COLUMNS = (
    "source_id, title, title_from, source_type, input_kind, input, url, url_norm, content_hash, "
    "original_sha256, original_name, mime_type, bytes, chars, status, ingested_at, metadata"
)


@dataclass
class NewSource:
    title: str
    title_from: str
    source_type: str
    input_kind: str
    input: str
    markdown: str
    content_hash: str
    original: bytes
    original_sha256: str
    original_ext: str
    url: str | None = None
    url_norm: str | None = None
    mime_type: str | None = None
    metadata: dict | None = None

    @property
    def source_id(self) -> str:
        return source_id_for(self.content_hash)


def source_id_for(content_hash: str) -> str:
    """Source ids are derived from the content hash: the same text always gets the same id."""
    return f"src-{content_hash[:12]}"


def raw_path(ws: Workspace, source_id: str) -> Path:
    return ws.raw_dir / f"{source_id}.md.gz"


@contextlib.contextmanager
def ingest_lock(ws: Workspace) -> Iterator[None]:
    """Exclusive lock around writing a source's files and row (between processes)."""
    ws.data.mkdir(parents=True, exist_ok=True)
    with open(ws.data / ".ingest.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def find_by_hash(conn: sqlite3.Connection, content_hash: str) -> dict | None:
    row = conn.execute(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE content_hash = ?", (content_hash,)).fetchone()
    return _source(row) if row else None


def find_by_url(conn: sqlite3.Connection, url_norm: str) -> dict | None:
    row = conn.execute(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE url_norm = ? LIMIT 1", (url_norm,)).fetchone()
    return _source(row) if row else None


def get(conn: sqlite3.Connection, source_id: str) -> dict | None:
    row = conn.execute(f"SELECT {SOURCE_COLUMNS} FROM sources WHERE source_id = ?", (source_id,)).fetchone()
    return _source(row) if row else None


def list_sources(conn: sqlite3.Connection, status: str | None = None) -> list[dict]:
    sql = f"SELECT {SOURCE_COLUMNS} FROM sources"
    args: list[Any] = []
    if status:
        sql += " WHERE status = ?"
        args.append(status)
    return [_source(r) for r in conn.execute(sql + " ORDER BY ingested_at, source_id", args)]


def counts_by_status(conn: sqlite3.Connection) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute("SELECT status, COUNT(*) FROM sources GROUP BY status")}


def read_markdown(ws: Workspace, source_id: str) -> str:
    return files.read_gzip_text(raw_path(ws, source_id))


def store(ws: Workspace, conn: sqlite3.Connection, new: NewSource) -> tuple[dict, bool]:
    """Store a converted source. Returns (row, created); created is False for a duplicate.

    Call under `ingest_lock`. Files first (atomic, content-addressed), then the
    row and its audit entry in one transaction.
    """
    existing = find_by_hash(conn, new.content_hash)
    if existing:
        return existing, False
    original_name = f"{new.original_sha256}{new.original_ext}"
    files.write_gzip_text(raw_path(ws, new.source_id), new.markdown)
    faults.point("ingest.after_raw_write")
    original_path = ws.originals_dir / original_name
    if not original_path.exists():
        files.atomic_write_bytes(original_path, new.original)
    faults.point("ingest.after_original_write")
    now = db.utcnow()
    with db.transaction(
        conn, "ingest", target=new.source_id,
        details={"title": new.title, "input": new.input, "source_type": new.source_type},
    ):
        conn.execute(
            f"INSERT INTO sources ({SOURCE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                new.source_id, new.title, new.title_from, new.source_type, new.input_kind, new.input,
                new.url, new.url_norm, new.content_hash, new.original_sha256, original_name,
                new.mime_type, len(new.original), len(new.markdown), "active", now,
                json.dumps(new.metadata or {}, ensure_ascii=False, sort_keys=True),
            ),
        )
        resolve_failures(conn, new.input)
        faults.point("ingest.before_commit")
    faults.point("ingest.after_commit")
    return get(conn, new.source_id), True


def reconcile(ws: Workspace, conn: sqlite3.Connection) -> dict[str, int]:
    """Remove raw and original files that no source row references (left by a crash).

    Holds the ingest lock so a file written by a concurrent ingest that has not
    committed its row yet is never taken for an orphan.
    """
    removed = {"raw": 0, "originals": 0}
    with ingest_lock(ws):
        ids = {r[0] for r in conn.execute("SELECT source_id FROM sources")}
        originals = {r[0] for r in conn.execute("SELECT original_name FROM sources")}
        for path in ws.raw_dir.glob("*.md.gz"):
            if path.name[: -len(".md.gz")] not in ids:
                removed["raw"] += files.remove_quietly(path)
        for path in ws.originals_dir.iterdir() if ws.originals_dir.exists() else []:
            if path.is_file() and path.name not in originals and not path.name.startswith("."):
                removed["originals"] += files.remove_quietly(path)
        for path in list(ws.raw_dir.glob(".*.tmp")) + list(ws.originals_dir.glob(".*.tmp")):
            files.remove_quietly(path)
    return removed


# --- maintenance (archive / delete; see kompl/maintain.py) -----------------------------

STATUSES = ("active", "archived")


def set_status(conn: sqlite3.Connection, source_id: str, status: str) -> bool:
    """Set a source's status ('active' or 'archived'). Returns whether it changed.

    Call inside the caller's transaction (the audit row is the caller's).
    """
    if status not in STATUSES:
        raise ValueError(f"unknown source status {status!r}")
    cur = conn.execute("UPDATE sources SET status = ? WHERE source_id = ? AND status != ?", (status, source_id, status))
    return cur.rowcount > 0


def delete_source(conn: sqlite3.Connection, source_id: str) -> bool:
    """Delete a source's row; its extraction, mentions, claims, relationships and conflicts
    go with it (ON DELETE CASCADE). Returns whether a row was deleted.

    Call inside the caller's transaction. The raw and original files stay until
    `remove_source_files` (or `reconcile`, which removes files no row refers to).
    """
    return conn.execute("DELETE FROM sources WHERE source_id = ?", (source_id,)).rowcount > 0


def remove_source_files(ws: Workspace, conn: sqlite3.Connection, source_id: str,
                        original_name: str | None) -> dict[str, int]:
    """Remove a deleted source's raw file, and its original unless another source row shares
    those bytes. Idempotent; does nothing while a row for `source_id` still exists."""
    removed = {"raw": 0, "originals": 0}
    with ingest_lock(ws):
        if get(conn, source_id) is not None:
            return removed
        removed["raw"] += files.remove_quietly(raw_path(ws, source_id))
        if original_name and "/" not in original_name and not original_name.startswith("."):
            shared = conn.execute("SELECT 1 FROM sources WHERE original_name = ? LIMIT 1", (original_name,)).fetchone()
            if shared is None:
                removed["originals"] += files.remove_quietly(ws.originals_dir / original_name)
    return removed


# --- failures -------------------------------------------------------------------------

def record_failure(
    conn: sqlite3.Connection, *, input: str, input_kind: str, code: str, error: str,
    hint: str | None, options: dict | None = None, kept_copy: str | None = None,
    failure_id: int | None = None,
) -> int:
    """Record (or update) the open failure for this input, with an audit row.

    A retried failure (`failure_id`) or an input that already has an open failure
    is updated in place (attempts + 1), so the list shows each input once.
    """
    now = db.utcnow()
    with db.transaction(conn, "ingest_failed", target=input, details={"code": code, "error": error}):
        if failure_id is not None:
            row = (failure_id,)
        else:
            row = conn.execute(
                "SELECT id FROM ingest_failures WHERE input = ? AND input != '-' AND resolved_at IS NULL"
                " ORDER BY id DESC LIMIT 1",
                (input,),
            ).fetchone()
        if row:
            conn.execute(
                "UPDATE ingest_failures SET code=?, error=?, hint=?, failed_at=?, attempts=attempts+1,"
                " options=?, kept_copy=COALESCE(?, kept_copy) WHERE id=?",
                (code, error, hint, now, json.dumps(options or {}), kept_copy, row[0]),
            )
            return row[0]
        cur = conn.execute(
            "INSERT INTO ingest_failures (input, input_kind, code, error, hint, failed_at, kept_copy, options)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (input, input_kind, code, error, hint, now, kept_copy, json.dumps(options or {})),
        )
        return cur.lastrowid


def resolve_failures(conn: sqlite3.Connection, input: str, failure_id: int | None = None) -> None:
    if failure_id is not None:
        conn.execute("UPDATE ingest_failures SET resolved_at=? WHERE id=? AND resolved_at IS NULL", (db.utcnow(), failure_id))
    elif input != "-":
        conn.execute("UPDATE ingest_failures SET resolved_at=? WHERE input=? AND resolved_at IS NULL", (db.utcnow(), input))


def open_failures(conn: sqlite3.Connection) -> list[dict]:
    rows = conn.execute(
        "SELECT id, input, input_kind, code, error, hint, failed_at, attempts, kept_copy, options"
        " FROM ingest_failures WHERE resolved_at IS NULL ORDER BY id"
    ).fetchall()
    return [dict(r) | {"options": json.loads(r["options"])} for r in rows]


def _source(row: sqlite3.Row) -> dict:
    out = dict(row)
    out["metadata"] = json.loads(out["metadata"] or "{}")
    return out
