"""kompl doctor: page files (missing, stale, hand-edited), vectors and source files against the database."""

from __future__ import annotations

import json

from kompl import doctor
from kompl import vectors as V
from kompl.wiki import store


def commit(ws, conn, key: str, title: str, body: str) -> dict:
    page, _ = store.commit_version(ws, conn, store.PageWrite(
        page_key=key, page_type="entity", title=title, body=body, sources=[], author="test"))
    return page


def problems(report) -> set[tuple[str, int | None]]:
    return {(f["problem"], f.get("page_id")) for f in report.findings}


def test_clean_workspace_exits_zero(ws, conn, kompl):
    page = commit(ws, conn, "entity:a", "Alpha", "Alpha text.")
    V.sync_pages(ws, conn, [page["page_id"]])
    result = kompl("doctor", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_doctor_finds_and_fixes_files_vectors_and_hand_edits(ws, conn, kompl):
    a = commit(ws, conn, "entity:a", "Alpha", "Alpha text.")
    b = commit(ws, conn, "entity:b", "Beta", "Beta text, first version.")
    c = commit(ws, conn, "entity:c", "Gamma", "Gamma text.")
    V.sync_pages(ws, conn, [a["page_id"], b["page_id"], c["page_id"]])
    old_b = store.content(conn, b["page_id"])
    b = commit(ws, conn, "entity:b", "Beta", "Beta text, second version.")
    V.sync_pages(ws, conn, [b["page_id"]])

    store.page_path(ws, a["slug"]).unlink()                          # deleted page file
    store.page_path(ws, b["slug"]).write_text(old_b, encoding="utf-8")  # stale file (an older version)
    edited = store.content(conn, c["page_id"]).replace("Gamma text.", "Gamma text, improved by a person.")
    store.page_path(ws, c["slug"]).write_text(edited, encoding="utf-8")  # hand edit
    d = commit(ws, conn, "entity:d", "Delta", "Delta text never embedded.")  # missing vectors

    result = kompl("doctor", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = {(f["problem"], f.get("page_id")) for f in report["findings"]}
    assert {("missing_file", a["page_id"]), ("stale_file", b["page_id"]), ("edited_by_hand", c["page_id"]),
            ("missing_vectors", d["page_id"])} <= found
    assert not store.page_path(ws, a["slug"]).exists()  # reporting changes nothing

    result = kompl("doctor", "--fix", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["remaining"] == 0
    assert store.page_path(ws, a["slug"]).read_text() == store.content(conn, a["page_id"])
    assert store.page_path(ws, b["slug"]).read_text() == store.content(conn, b["page_id"])
    # the hand edit is kept, as a human version
    current_c = store.get(conn, c["page_id"])
    assert current_c["version"] == 2
    assert store.history(conn, c["page_id"])[-1]["author"] == store.HUMAN
    assert "improved by a person" in store.content(conn, c["page_id"])
    assert store.page_path(ws, c["slug"]).read_text() == edited
    # vectors follow, including the new human version
    hits = V.VectorIndex(ws).query("improved by a person", k=1)
    assert hits and hits[0].page_id == c["page_id"]
    assert V.VectorIndex(ws).query("Delta text never embedded", k=1)[0].page_id == d["page_id"]

    again = doctor.check(ws, conn)
    assert again.findings == [] and again.exit_code == 0


def test_wiped_vector_store_is_rebuilt(ws, conn):
    import shutil

    pages = [commit(ws, conn, f"entity:{i}", f"P{i}", f"Text {i}.") for i in range(3)]
    V.sync_pages(ws, conn, [p["page_id"] for p in pages])
    shutil.rmtree(ws.vectors_dir)
    report = doctor.check(ws, conn)
    assert {("missing_vectors", p["page_id"]) for p in pages} <= problems(report)
    fixed = doctor.check(ws, conn, fix=True)
    assert fixed.exit_code == 0
    assert doctor.check(ws, conn).findings == []


def test_source_files_without_rows_and_rows_without_files(ws, conn):
    from kompl.ingest import store as sources
    from kompl.ingest.service import expand, ingest

    doc = ws.root / "note.md"
    doc.write_text("# Note\n\nA short note about penicillin and moulds.\n")
    inputs, rep = expand([str(doc)])
    ingest(ws, conn, inputs, report=rep)
    sid = conn.execute("SELECT source_id FROM sources").fetchone()[0]
    (ws.raw_dir / "src-000000000000.md.gz").write_bytes(b"orphan")
    report = doctor.check(ws, conn, vectors=False)
    assert ("orphan_raw_file", None) in problems(report)
    assert (ws.raw_dir / "src-000000000000.md.gz").exists()
    report = doctor.check(ws, conn, fix=True, vectors=False)
    assert not (ws.raw_dir / "src-000000000000.md.gz").exists() and report.exit_code == 0

    sources.raw_path(ws, sid).unlink()
    report = doctor.check(ws, conn, fix=True, vectors=False)
    assert [f["source_id"] for f in report.findings if f["problem"] == "missing_raw_file"] == [sid]
    assert report.exit_code == 1  # cannot be repaired here
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 1  # the row stays


def test_repair_on_start_fixes_page_files_without_chromadb(ws, conn):
    import sys

    page = commit(ws, conn, "entity:a", "Alpha", "Alpha text.")
    store.page_path(ws, page["slug"]).unlink()
    had = "chromadb" in sys.modules
    found = doctor.repair_on_start(ws, conn)
    assert [f["problem"] for f in found] == ["missing_file"]
    assert store.page_path(ws, page["slug"]).exists()
    assert ("chromadb" in sys.modules) == had
    assert doctor.repair_on_start(ws, conn) == []
