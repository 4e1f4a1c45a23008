"""Crash consistency and concurrency of ingest, with real processes.

`KOMPL_FAULT=<point>` makes `python -m kompl` SIGKILL itself at a named point in
storing a source. After each crash the next command must find: no source row
without its raw file, no raw file (or original) without its row, and a retry that
stores every input exactly once. Two concurrent ingests of overlapping inputs
must store each document once and both succeed.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Kompl
from fixtures_docs import docx_bytes, token

POINTS = ["ingest.after_raw_write", "ingest.after_original_write", "ingest.before_commit", "ingest.after_commit"]


def kompl_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOMPL_")}
    return env | extra


def start(home: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kompl", "--home", str(home), "ingest", *map(str, args), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kompl_env(**env), cwd=home.parent,
    )


def assert_consistent(root: Path) -> list[dict]:
    """The invariant: rows and files match one to one. Returns the source rows."""
    conn = sqlite3.connect(root / "data" / "kompl.db")
    conn.row_factory = sqlite3.Row
    try:
        sources = [dict(r) for r in conn.execute("SELECT source_id, original_name, content_hash FROM sources")]
        ingest_rows = conn.execute("SELECT COUNT(*) FROM activity WHERE action = 'ingest'").fetchone()[0]
    finally:
        conn.close()
    raw = {p.name[: -len(".md.gz")] for p in (root / "data" / "raw").glob("*.md.gz")}
    originals = {p.name for p in (root / "data" / "originals").iterdir() if p.is_file()}
    assert raw == {s["source_id"] for s in sources}, "raw files and source rows differ"
    assert originals == {s["original_name"] for s in sources}, "originals and source rows differ"
    assert not list((root / "data").rglob("*.tmp")), "temporary files left behind"
    assert ingest_rows == len(sources), "every source has exactly one audit row"
    for s in sources:  # every raw file is whole
        gzip.decompress((root / "data" / "raw" / f"{s['source_id']}.md.gz").read_bytes())
    return sources


def no_row_without_raw(root: Path) -> None:
    """The half of the invariant that must hold even straight after a crash."""
    conn = sqlite3.connect(root / "data" / "kompl.db")
    ids = [r[0] for r in conn.execute("SELECT source_id FROM sources")]
    conn.close()
    for sid in ids:
        assert (root / "data" / "raw" / f"{sid}.md.gz").exists(), sid


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """One workspace per fault point, each crashed there; the processes run in parallel."""
    from kompl.workspace import init_workspace

    runs = {}
    for point in POINTS:
        base = tmp_path_factory.mktemp(point.replace(".", "_"))
        ws, _ = init_workspace(base / "wiki")
        first, second = base / "first.md", base / "second.docx"
        first.write_text(f"# First\n\nfirst {token()}\n")
        second.write_bytes(docx_bytes([f"second {token()}"]))
        runs[point] = (ws.root, [first, second], start(ws.root, first, second, KOMPL_FAULT=point))
    out = {}
    for point, (root, inputs, proc) in runs.items():
        stdout, stderr = proc.communicate(timeout=60)
        out[point] = (root, inputs, proc.returncode, stdout, stderr)
    return out


@pytest.mark.parametrize("point", POINTS)
def test_crash_at_each_point_leaves_a_consistent_workspace(crashed, point):
    root, inputs, returncode, stdout, stderr = crashed[point]
    assert returncode == -signal.SIGKILL, stderr.decode()
    assert stdout == b""  # it died in the middle of the first input
    no_row_without_raw(root)
    raw_now = list((root / "data" / "raw").glob("*.md.gz"))
    assert len(raw_now) == 1  # the first input's raw file was written before the crash
    conn = sqlite3.connect(root / "data" / "kompl.db")
    committed = conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
    conn.close()
    assert committed == (1 if point == "ingest.after_commit" else 0)

    # The next command cleans up and a retry stores each input exactly once.
    kompl = Kompl(root)
    result = kompl("ingest", *map(str, inputs), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    if point == "ingest.after_commit":
        assert [d["input"] for d in report["duplicates"]] == [str(inputs[0])]
        assert [e["input"] for e in report["ingested"]] == [str(inputs[1])]
    else:
        assert [e["input"] for e in report["ingested"]] == [str(i) for i in inputs]
    sources = assert_consistent(root)
    assert len(sources) == 2
    # and again: nothing new, still consistent
    report = json.loads(kompl("ingest", *map(str, inputs), "--json").stdout)
    assert report["ingested"] == [] and len(report["duplicates"]) == 2
    assert len(assert_consistent(root)) == 2


def test_orphans_are_removed_by_the_next_ingest(ws, kompl, tmp_path):
    (tmp_path / "keep.md").write_text("keep me\n")
    assert kompl("ingest", tmp_path / "keep.md").exit_code == 0
    orphan_raw = ws.raw_dir / "src-000000000000.md.gz"
    orphan_raw.write_bytes(gzip.compress(b"orphan"))
    (ws.originals_dir / ("0" * 64 + ".pdf")).write_bytes(b"%PDF orphan")
    (ws.raw_dir / ".src-1.md.gz.abcd.tmp").write_bytes(b"half a write")
    (ws.originals_dir / ".x.pdf.efgh.tmp").write_bytes(b"half a write")
    (tmp_path / "new.md").write_text("new\n")
    assert kompl("ingest", tmp_path / "new.md").exit_code == 0
    assert not orphan_raw.exists()
    assert len(assert_consistent(ws.root)) == 2


def test_fault_point_is_a_no_op_unless_named(monkeypatch):
    from kompl import faults

    monkeypatch.setenv("KOMPL_FAULT", "some.other_point")
    faults.point("ingest.after_commit")  # still alive
    monkeypatch.delenv("KOMPL_FAULT")
    faults.point("ingest.after_commit")


def test_two_concurrent_ingests_store_each_document_once(ws, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    paths = []
    for i in range(24):
        path = folder / f"doc{i:02d}.md"
        path.write_text(f"# Doc {i}\n\n{token()}\n")
        paths.append(path)
    for i in range(4):
        path = folder / f"word{i}.docx"
        path.write_bytes(docx_bytes([f"word {i} {token()}"]))
        paths.append(path)
    (folder / "same-as-doc00.txt").write_text(paths[0].read_text())  # a duplicate inside the batch
    left = paths[:18] + [folder / "same-as-doc00.txt"]
    right = paths[8:]  # 10 files overlap with the other process
    procs = [start(ws.root, *left), start(ws.root, *right)]
    reports = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr.decode()
        assert b"Traceback" not in stderr
        reports.append(json.loads(stdout))
    sources = assert_consistent(ws.root)
    assert len(sources) == len(paths)
    ingested = [e["source_id"] for r in reports for e in r["ingested"]]
    assert sorted(ingested) == sorted(s["source_id"] for s in sources)  # each stored by exactly one process
    for report, batch in zip(reports, (left, right)):
        assert report["failed"] == []
        seen = [e["input"] for e in report["ingested"]] + [d["input"] for d in report["duplicates"]]
        assert sorted(seen) == sorted(str(p) for p in batch)
