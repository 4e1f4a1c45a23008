"""The page store: versions, provenance, links, FTS, files on disk and their repair."""

from __future__ import annotations

from kompl import db
from kompl.wiki import store
from kompl.wiki.store import PageWrite


import pytest


@pytest.fixture(autouse=True)
def _sources(conn):
    """Two active sources the pages below cite."""
    with db.transaction(conn):
        for sid in ("src-aaaaaaaaaaaa", "src-bbbbbbbbbbbb"):
            conn.execute(
                "INSERT INTO sources (source_id, title, title_from, source_type, input_kind, input, content_hash,"
                " original_sha256, bytes, chars, status, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (sid, sid, "given", "text", "stdin", "-", sid, sid, 1, 1, "active", "now"))


def write(key, title, body, sources=("src-aaaaaaaaaaaa",), **kw):
    return PageWrite(page_key=key, page_type=key.split(":")[0], title=title, body=body,
                     sources=[(s, "summary") for s in sources], author="kompl/offline", **kw)


def test_commit_creates_page_version_file_and_fts(ws, conn):
    page, changed = store.commit_version(ws, conn, write("entity:alexander fleming", "Alexander Fleming", "A bacteriologist."))
    assert changed and page["version"] == 1
    path = ws.pages_dir / "alexander-fleming.md"
    assert path.exists() and "A bacteriologist." in path.read_text()
    assert (ws.history_dir / "alexander-fleming" / "1.md").exists()
    hits = conn.execute("SELECT page_id FROM pages_fts WHERE pages_fts MATCH 'bacteriologist'").fetchall()
    assert [h[0] for h in hits] == [page["page_id"]]
    assert store.page_source_ids(conn, page["page_id"]) == ["src-aaaaaaaaaaaa"]
    actions = [a["action"] for a in db.activity(conn)]
    assert "page_commit" in actions


def test_every_version_is_kept_and_retrievable(ws, conn):
    for n in range(1, 4):
        page, _ = store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", f"Version {n} text."))
    assert page["version"] == 3
    assert [v["version"] for v in store.history(conn, page["page_id"])] == [1, 2, 3]
    for n in (1, 2, 3):
        assert f"Version {n} text." in store.content(conn, page["page_id"], n)
        assert f"Version {n} text." in (ws.history_dir / "penicillin" / f"{n}.md").read_text()
    fts = conn.execute("SELECT body FROM pages_fts WHERE page_id = ?", (page["page_id"],)).fetchall()
    assert len(fts) == 1 and "Version 3" in fts[0][0]  # only the current version is searchable


def test_identical_update_is_a_no_op(ws, conn):
    store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "Same."))
    page, changed = store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "Same."))
    assert not changed and page["version"] == 1


def test_same_title_different_keys_get_two_pages(ws, conn):
    a, _ = store.commit_version(ws, conn, write("source:src-aaaaaaaaaaaa", "Annual Report", "First."))
    b, _ = store.commit_version(ws, conn, write("source:src-bbbbbbbbbbbb", "Annual Report", "Second.", sources=("src-bbbbbbbbbbbb",)))
    assert a["page_id"] != b["page_id"] and a["slug"] != b["slug"]
    assert "First." in (ws.pages_dir / f"{a['slug']}.md").read_text()
    assert "Second." in (ws.pages_dir / f"{b['slug']}.md").read_text()


def test_links_are_injected_and_old_pages_gain_links_to_new_pages(ws, conn):
    old, _ = store.commit_version(ws, conn, write("entity:alexander fleming", "Alexander Fleming",
                                                   "Fleming worked with Howard Florey later."))
    assert "[[" not in store.content(conn, old["page_id"])
    new, _ = store.commit_version(ws, conn, write("entity:howard florey", "Howard Florey",
                                                   "Florey led the Oxford team after Alexander Fleming's work."))
    assert "[[Alexander Fleming]]" in store.content(conn, new["page_id"])
    changed = store.link_pass(ws, conn, [new["page_id"]])
    assert changed == [old["page_id"]]
    text = store.content(conn, old["page_id"])
    assert "[[Howard Florey]]" in text
    assert store.history(conn, old["page_id"])[-1]["author"] == store.LINKER
    links = conn.execute("SELECT to_title, to_page FROM page_links WHERE from_page = ?", (old["page_id"],)).fetchall()
    assert [(r[0], r[1]) for r in links] == [("Howard Florey", new["page_id"])]


def test_crash_before_file_write_is_repaired(ws, conn):
    page, _ = store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "One."))
    path = ws.pages_dir / "penicillin.md"
    old_text = path.read_text()
    page, _ = store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "Two."))
    path.write_text(old_text)  # as if the process died between the DB commit and the file write
    findings = store.reconcile_files(ws, conn)
    assert findings == [{"page_id": page["page_id"], "slug": "penicillin", "problem": "stale_file"}]
    assert "Two." in path.read_text()
    path.unlink()
    assert store.reconcile_files(ws, conn)[0]["problem"] == "missing_file"
    assert "Two." in path.read_text()
    assert store.reconcile_files(ws, conn) == []


def test_hand_edit_is_kept_as_a_human_version(ws, conn):
    page, _ = store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "Machine text."))
    path = ws.pages_dir / "penicillin.md"
    path.write_text(path.read_text().replace("Machine text.", "Corrected by a person."))
    findings = store.reconcile_files(ws, conn)
    assert findings[0]["problem"] == "edited_by_hand"
    page = store.get(conn, page["page_id"])
    assert page["version"] == 2
    assert store.history(conn, page["page_id"])[-1]["author"] == "human"
    assert "Corrected by a person." in path.read_text()
    assert "Machine text." in store.content(conn, page["page_id"], 1)


def test_pages_with_only_archived_sources_are_hidden(ws, conn):
    with db.transaction(conn):
        conn.execute("UPDATE sources SET status = 'archived' WHERE source_id = 'src-aaaaaaaaaaaa'")
    store.commit_version(ws, conn, write("concept:penicillin", "Penicillin", "Hidden."))
    assert store.list_pages(conn) == []
    assert [p["title"] for p in store.list_pages(conn, include_hidden=True)] == ["Penicillin"]
