"""SQLite connection, numbered migrations, and the transaction + audit helper.

SQLite is kompl's system of record. Connections use WAL, enforce foreign keys
and wait on a busy database before giving up with a clear message. Migrations
are `kompl/migrations/mNNN_verb_noun.sql` files applied in order, each in one
transaction together with the row that records it. Every state change goes
through `transaction()`, which writes an `activity` row (the audit log) in the
same transaction.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kompl.errors import DatabaseError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_MS = 30_000  # the default; a workspace sets its own with `db_busy_timeout_s`
_busy_timeout_override_ms: int | None = None
_MIGRATION_NAME = re.compile(r"^m(\d{3})_[a-z0-9_]+\.sql$")


def utcnow() -> str:
    """Current time as ISO-8601 UTC with seconds precision (sortable as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def set_busy_timeout(seconds: float | None) -> None:
    """How long connections opened from now on wait for another process's write lock (None: the default)."""
    global _busy_timeout_override_ms
    _busy_timeout_override_ms = None if seconds is None else max(1, int(seconds * 1000))


def _busy_timeout_ms() -> int:
    return BUSY_TIMEOUT_MS if _busy_timeout_override_ms is None else _busy_timeout_override_ms


def connect(path: Path, *, migrate: bool = True) -> sqlite3.Connection:
    """Open the workspace database (creating it if needed) and bring its schema up to date."""
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=_busy_timeout_ms() / 1000)
    except sqlite3.Error as exc:
        raise DatabaseError(f"Could not open the database {path}: {exc}") from None
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {_busy_timeout_ms()}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        if migrate:
            apply_migrations(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _translate(exc, "opening the database") from None
    return conn


def migration_files() -> list[tuple[str, str]]:
    """(name, sql) for every migration, in order. Duplicate numbers are a packaging bug."""
    found: list[tuple[int, str, str]] = []
    for path in sorted(MIGRATIONS_DIR.glob("m*.sql")):
        match = _MIGRATION_NAME.match(path.name)
        if not match:
            raise DatabaseError(f"Badly named migration file {path.name}")
        found.append((int(match.group(1)), path.stem, path.read_text(encoding="utf-8")))
    numbers = [n for n, _, _ in found]
    if len(numbers) != len(set(numbers)):
        raise DatabaseError("Two migrations share a number; this kompl installation is broken")
    return [(name, sql) for _, name, sql in found]


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY name")]


def apply_migrations(conn: sqlite3.Connection) -> list[str]:
    """Apply pending migrations, each atomically with its record. Returns the names applied."""
    done = set(applied_migrations(conn))
    known = migration_files()
    unknown = done - {name for name, _ in known}
    if unknown:
        raise DatabaseError(
            f"This workspace was written by a newer kompl (migrations {', '.join(sorted(unknown))})",
            hint="upgrade kompl",
        )
    applied = []
    for name, sql in known:
        if name in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        # Another process may have applied it while we waited for the write lock.
        if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
            conn.execute("COMMIT")
            continue
        try:
            # executescript() would commit on its own; run statement by statement instead.
            for statement in _split_sql(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, utcnow()))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


def _split_sql(sql: str) -> list[str]:
    """Split a migration into statements (sqlite3.complete_statement knows about triggers)."""
    statements, buf = [], ""
    for line in sql.splitlines(keepends=True):
        if not buf and (not line.strip() or line.strip().startswith("--")):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements


def _translate(exc: sqlite3.Error, doing: str) -> DatabaseError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return DatabaseError(
            f"The database stayed locked by another kompl process while {doing} "
            f"(waited {_busy_timeout_ms() / 1000:g} s)",
            hint="wait for the other command to finish, then run this one again "
            "(or raise db_busy_timeout_s in kompl.toml)",
        )
    return DatabaseError(f"Database error while {doing}: {text}")


@contextlib.contextmanager
def transaction(
    conn: sqlite3.Connection,
    action: str | None = None,
    *,
    target: str | None = None,
    details: dict[str, Any] | None = None,
    actor: str = "user",
) -> Iterator[sqlite3.Connection]:
    """Run a block in one transaction; when `action` is given, also write the audit row.

    Nested use becomes a savepoint, so helpers can open their own transaction and
    still be part of the caller's. The outermost level takes the write lock at
    once (BEGIN IMMEDIATE), which makes concurrent writers queue instead of
    failing half-way.
    """
    depth = _depths.get(id(conn), 0)
    name = f"sp{depth}"
    try:
        if depth == 0:
            conn.execute("BEGIN IMMEDIATE")
        else:
            conn.execute(f"SAVEPOINT {name}")
    except sqlite3.OperationalError as exc:
        raise _translate(exc, f"starting {action or 'a change'}") from None
    _set_depth(conn, depth + 1)
    try:
        yield conn
        if action is not None:
            log_activity(conn, action, target=target, details=details, actor=actor)
        if depth == 0:
            conn.execute("COMMIT")
        else:
            conn.execute(f"RELEASE {name}")
    except BaseException as exc:
        # The transaction may already be gone (e.g. SQLite rolled back on a full disk).
        if conn.in_transaction:
            if depth == 0:
                conn.execute("ROLLBACK")
            else:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
        if isinstance(exc, sqlite3.OperationalError):
            raise _translate(exc, action or "writing") from None
        raise
    finally:
        _set_depth(conn, depth)


# Nesting depth per open connection (sqlite3.Connection takes no attributes).
_depths: dict[int, int] = {}


def _set_depth(conn: sqlite3.Connection, depth: int) -> None:
    if depth:
        _depths[id(conn)] = depth
    else:
        _depths.pop(id(conn), None)


def log_activity(
    conn: sqlite3.Connection,
    action: str,
    *,
    target: str | None = None,
    details: dict[str, Any] | None = None,
    actor: str = "user",
) -> None:
    """Write one audit row. Call inside a transaction (use `transaction(action=...)`)."""
    conn.execute(
        "INSERT INTO activity (at, action, target, actor, details) VALUES (?, ?, ?, ?, ?)",
        (utcnow(), action, target, actor, json.dumps(details or {}, ensure_ascii=False, sort_keys=True)),
    )


def activity(conn: sqlite3.Connection, *, action: str | None = None, since: str | None = None) -> list[dict]:
    sql = "SELECT id, at, action, target, actor, details FROM activity WHERE 1=1"
    args: list[Any] = []
    if action:
        sql += " AND action = ?"
        args.append(action)
    if since:
        sql += " AND at >= ?"
        args.append(since)
    rows = conn.execute(sql + " ORDER BY id", args).fetchall()
    return [dict(row) | {"details": json.loads(row["details"])} for row in rows]
