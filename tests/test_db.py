"""The SQLite store: connection settings, migrations, transactions and the audit log."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kompl import db
from kompl.errors import DatabaseError


def test_connection_settings(conn):
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS


def test_blank_database_gets_every_migration_once(tmp_path):
    path = tmp_path / "fresh.db"
    conn = db.connect(path)
    names = [name for name, _ in db.migration_files()]
    assert names and names[0].startswith("m001_")
    assert db.applied_migrations(conn) == names
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"activity", "sources", "ingest_failures", "_migrations"} <= tables
    conn.close()
    # opening again applies nothing and records nothing twice
    conn = db.connect(path)
    assert db.apply_migrations(conn) == []
    assert conn.execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == len(names)
    conn.close()


def _write_migrations(folder, files: dict[str, str]):
    folder.mkdir(exist_ok=True)
    for name, sql in files.items():
        (folder / name).write_text(sql)


def test_old_schema_is_brought_forward(tmp_path, monkeypatch):
    """A database at migration 1 gets migration 2 only, and keeps its rows."""
    folder = tmp_path / "migs"
    _write_migrations(folder, {"m001_create_things.sql": "CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT);"})
    monkeypatch.setattr(db, "MIGRATIONS_DIR", folder)
    conn = db.connect(tmp_path / "old.db")
    conn.execute("INSERT INTO things (name) VALUES ('kept')")
    _write_migrations(folder, {"m002_add_colour.sql": "-- a comment line\nALTER TABLE things ADD COLUMN colour TEXT;\n"
                                                      "UPDATE things SET colour = 'red';\n"})
    assert db.apply_migrations(conn) == ["m002_add_colour"]
    assert tuple(conn.execute("SELECT name, colour FROM things").fetchone()) == ("kept", "red")
    assert db.applied_migrations(conn) == ["m001_create_things", "m002_add_colour"]


def test_failing_migration_rolls_back_and_is_not_recorded(tmp_path, monkeypatch):
    folder = tmp_path / "migs"
    _write_migrations(folder, {
        "m001_create_things.sql": "CREATE TABLE things (id INTEGER PRIMARY KEY);",
        # the first statement works, the second fails: the first must be undone too
        "m002_break_things.sql": "CREATE TABLE half_done (x);\nINSERT INTO no_such_table VALUES (1);\n",
    })
    monkeypatch.setattr(db, "MIGRATIONS_DIR", folder)
    path = tmp_path / "broken.db"
    with pytest.raises(DatabaseError) as info:
        db.connect(path)
    assert "no_such_table" in str(info.value)
    raw = sqlite3.connect(path)
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "things" in tables and "half_done" not in tables
    assert [r[0] for r in raw.execute("SELECT name FROM _migrations")] == ["m001_create_things"]
    raw.close()


def test_migration_applied_by_another_process_meanwhile_is_skipped(tmp_path, monkeypatch):
    """Two processes opening a fresh database: the one that waited must not apply it again."""
    folder = tmp_path / "migs"
    _write_migrations(folder, {"m001_create_things.sql": "CREATE TABLE things (id INTEGER PRIMARY KEY);"})
    monkeypatch.setattr(db, "MIGRATIONS_DIR", folder)
    path = tmp_path / "race.db"
    first = db.connect(path, migrate=False)
    second = db.connect(path, migrate=False)
    stale = db.applied_migrations(second)  # what the second saw before the first finished
    assert db.apply_migrations(first) == ["m001_create_things"]
    monkeypatch.setattr(db, "applied_migrations", lambda conn: stale)
    assert db.apply_migrations(second) == []
    first.close()
    second.close()


def test_database_from_a_newer_kompl(tmp_path):
    conn = db.connect(tmp_path / "x.db")
    conn.execute("INSERT INTO _migrations VALUES ('m999_from_the_future', 'x')")
    conn.close()
    with pytest.raises(DatabaseError, match="newer kompl"):
        db.connect(tmp_path / "x.db")


def test_badly_named_migration_is_refused(tmp_path, monkeypatch):
    _write_migrations(tmp_path / "migs", {"m01-bad.sql": "SELECT 1;"})
    monkeypatch.setattr(db, "MIGRATIONS_DIR", tmp_path / "migs")
    with pytest.raises(DatabaseError, match="Badly named"):
        db.migration_files()


def test_transaction_writes_its_audit_row(conn):
    before = len(db.activity(conn))
    with db.transaction(conn, "thing_done", target="t1", details={"n": 1}):
        conn.execute("CREATE TABLE IF NOT EXISTS scratch (x)")
        conn.execute("INSERT INTO scratch VALUES (1)")
    rows = db.activity(conn)
    assert len(rows) == before + 1
    assert rows[-1]["action"] == "thing_done" and rows[-1]["target"] == "t1" and rows[-1]["details"] == {"n": 1}
    assert not conn.in_transaction


def test_failed_transaction_leaves_no_row_and_no_audit(conn):
    conn.execute("CREATE TABLE scratch (x)")
    before = len(db.activity(conn))
    with pytest.raises(RuntimeError):
        with db.transaction(conn, "never"):
            conn.execute("INSERT INTO scratch VALUES (1)")
            raise RuntimeError("boom")
    assert conn.execute("SELECT COUNT(*) FROM scratch").fetchone()[0] == 0
    assert len(db.activity(conn)) == before
    assert not conn.in_transaction


def test_nested_transaction_is_a_savepoint(conn):
    conn.execute("CREATE TABLE scratch (x)")
    with db.transaction(conn, "outer"):
        conn.execute("INSERT INTO scratch VALUES ('outer')")
        with pytest.raises(ValueError):
            with db.transaction(conn, "inner_fails"):
                conn.execute("INSERT INTO scratch VALUES ('inner')")
                raise ValueError
        assert conn.in_transaction  # the outer transaction survives the inner rollback
        with db.transaction(conn, "inner_ok"):
            conn.execute("INSERT INTO scratch VALUES ('inner2')")
    assert [r[0] for r in conn.execute("SELECT x FROM scratch ORDER BY rowid")] == ["outer", "inner2"]
    actions = [r["action"] for r in db.activity(conn)]
    assert "inner_fails" not in actions
    assert actions[-2:] == ["inner_ok", "outer"]
    # an outer failure undoes what the inner block committed to its savepoint
    with pytest.raises(KeyError):
        with db.transaction(conn, "outer2"):
            with db.transaction(conn, "inner3"):
                conn.execute("INSERT INTO scratch VALUES ('gone')")
            raise KeyError
    assert conn.execute("SELECT COUNT(*) FROM scratch WHERE x = 'gone'").fetchone()[0] == 0
    assert "inner3" not in [r["action"] for r in db.activity(conn)]


def test_busy_database_is_a_clear_error(ws, monkeypatch):
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 50)
    holder = db.connect(ws.db_path)
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(ws.db_path, isolation_level=None, timeout=0.05)
    try:
        with pytest.raises(DatabaseError, match="locked by another kompl process"):
            with db.transaction(waiter, "blocked"):
                pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        waiter.close()


def test_every_ingest_writes_activity_rows(kompl, ws, conn, tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nalpha\n")
    (tmp_path / "empty.md").write_bytes(b"")
    result = kompl("ingest", tmp_path / "a.md", tmp_path / "empty.md", "--json")
    assert result.exit_code == 1
    source_id = json.loads(result.stdout)["ingested"][0]["source_id"]
    rows = db.activity(conn)
    ingest = [r for r in rows if r["action"] == "ingest"]
    assert [r["target"] for r in ingest] == [source_id]
    assert ingest[0]["details"]["title"] == "A" and ingest[0]["actor"] == "user"
    failed = [r for r in rows if r["action"] == "ingest_failed"]
    assert len(failed) == 1 and failed[0]["details"]["code"] == "empty"
    # an ingest row exists for each source row, no more, no less
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == len(ingest)
    # a duplicate changes nothing, so it writes no ingest row
    assert kompl("ingest", tmp_path / "a.md").exit_code == 0
    assert len([r for r in db.activity(conn) if r["action"] == "ingest"]) == 1
