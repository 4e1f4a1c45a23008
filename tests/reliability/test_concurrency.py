"""Two kompl processes at once: no lost write, no duplicate source, no crash on a locked database.

(Two ingests of overlapping files at once: tests/test_ingest_crash.py.)
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time

from reliability import harness
from reliability.invariants import check_invariants, signature


def _new_docs(folder, n=3):
    folder.mkdir()
    paths = []
    for i in range(n):
        path = folder / f"extra{i}.md"
        path.write_text(f"# Extra {i}\n\nHoward Florey wrote note {i} about penicillin trials in Oxford.\n")
        paths.append(path)
    return paths


def _ok(run: harness.Run) -> None:
    assert run.returncode == 0, (run.stdout[-500:], run.stderr[-1500:])
    assert "Traceback" not in run.stderr


def test_ingest_while_compiling(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["ingested"], home)
    docs = _new_docs(tmp_path / "more")
    t0 = time.perf_counter()
    compiling = harness.start(home, "compile")
    ingesting = harness.start(home, "ingest", *docs)
    _ok(harness.finish(compiling, t0))
    _ok(harness.finish(ingesting, t0))
    sources = signature(home)["sources"]
    assert len(sources) == len(stages["inputs"]) + len(docs) == len(set(sources))
    assert check_invariants(home, completed=["ingest", "draft"]) == []
    # the next compile takes the new sources in; nothing from the first one is lost
    _ok(harness.kompl_inproc(home, "compile"))
    _ok(harness.kompl_inproc(home, "approve", "--all"))
    assert check_invariants(home, completed=["approve"]) == []
    assert set(stages["refs"]["approve"].signature["pages"]) <= set(signature(home)["pages"])


def test_approve_while_asking(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["compiled"], home)
    t0 = time.perf_counter()
    approving = harness.start(home, "approve", "--all")
    asking = harness.start(home, "ask", "Who discovered penicillin?")
    _ok(harness.finish(approving, t0))
    _ok(harness.finish(asking, t0))
    assert signature(home) == stages["refs"]["approve"].signature
    assert check_invariants(home, completed=["approve"]) == []


def _hold_write_lock(home, seconds: float | None = None):
    conn = sqlite3.connect(home / "data" / "kompl.db", isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    if seconds is not None:
        threading.Timer(seconds, lambda: (conn.execute("COMMIT"), conn.close())).start()
    return conn


def test_locked_database_gives_up_with_a_clear_message(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["init"], home)
    (home / "kompl.toml").write_text("db_busy_timeout_s = 0.5\n")
    doc = _new_docs(tmp_path / "more", 1)[0]
    lock = _hold_write_lock(home)
    try:
        started = time.perf_counter()
        blocked = harness.run(home, "ingest", doc)
        waited = time.perf_counter() - started
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert blocked.returncode == 2, (blocked.stdout, blocked.stderr)
    assert "Traceback" not in blocked.stderr
    assert "locked by another kompl process" in blocked.stderr and "db_busy_timeout_s" in blocked.stderr
    assert waited < 20
    assert signature(home)["sources"] == []
    _ok(harness.run(home, "ingest", doc))  # once the lock is gone it goes through
    assert len(signature(home)["sources"]) == 1
    assert check_invariants(home, completed=["ingest"]) == []


def test_a_briefly_locked_database_is_waited_for(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["init"], home)
    doc = _new_docs(tmp_path / "more", 1)[0]
    _hold_write_lock(home, seconds=2.0)  # released by a timer while kompl waits (default: 30 s)
    _ok(harness.run(home, "ingest", doc))
    assert len(signature(home)["sources"]) == 1
    assert check_invariants(home, completed=["ingest"]) == []
