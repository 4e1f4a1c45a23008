"""`kompl pages`, `kompl show`, `kompl history` as a user runs them."""

from __future__ import annotations

import json

import pytest

from kompl import db
from kompl.wiki import store
from kompl.wiki.store import PageWrite


@pytest.fixture
def wiki(ws, conn):
    with db.transaction(conn):
        for sid, status in (("src-aaaaaaaaaaaa", "active"), ("src-bbbbbbbbbbbb", "archived")):
            conn.execute(
                "INSERT INTO sources (source_id, title, title_from, source_type, input_kind, input, content_hash,"
                " original_sha256, bytes, chars, status, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (sid, sid, "given", "text", "stdin", "-", sid, sid, 1, 1, status, "now"))
    def put(key, title, body, source):
        return store.commit_version(ws, conn, PageWrite(key, key.split(":")[0], title, body, [(source, "summary")],
                                                        "kompl/offline", summary=f"About {title}."))[0]
    fleming = put("entity:e1", "Alexander Fleming", "Discovered penicillin [src-aaaaaaaaaaaa].", "src-aaaaaaaaaaaa")
    put("entity:e1", "Alexander Fleming", "Discovered penicillin in 1928 [src-aaaaaaaaaaaa].", "src-aaaaaaaaaaaa")
    put("entity:e2", "Hidden Person", "Only in an archived source.", "src-bbbbbbbbbbbb")
    return fleming


def test_pages_json_contract_hides_archived_only_pages(kompl, wiki):
    result = kompl("pages", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [r["title"] for r in rows] == ["Alexander Fleming"]
    row = rows[0]
    assert {"page_id", "title", "page_type", "version", "sources", "path"} <= set(row)
    assert row["version"] == 2 and row["sources"] == ["src-aaaaaaaaaaaa"]
    assert row["path"] == "data/pages/alexander-fleming.md"
    shown = json.loads(kompl("pages", "--json", "--include-archived").stdout)
    assert {r["title"] for r in shown} == {"Alexander Fleming", "Hidden Person"}


def test_show_raw_and_versions(kompl, wiki):
    raw = kompl("show", "Alexander Fleming", "--raw")
    assert raw.exit_code == 0 and "in 1928" in raw.stdout and raw.stdout.startswith("---\n")
    old = kompl("show", "alexander-fleming", "--version", "1", "--raw")
    assert "in 1928" not in old.stdout and "Discovered penicillin" in old.stdout
    rendered = kompl("show", str(wiki["page_id"]))
    assert rendered.exit_code == 0 and "Alexander Fleming" in rendered.stdout


def test_history_lists_every_version(kompl, wiki):
    rows = json.loads(kompl("history", "Alexander Fleming", "--json").stdout)
    assert [r["version"] for r in rows] == [1, 2]
    assert all(r["author"] == "kompl/offline" for r in rows)


def test_unknown_page_is_a_clear_error(kompl, wiki):
    result = kompl("show", "No Such Page")
    assert result.exit_code == 2
    assert "No page" in result.stderr and "Traceback" not in result.stderr


def test_a_crash_between_commit_and_file_write_is_repaired_by_the_next_command(kompl, wiki, ws):
    path = ws.pages_dir / "alexander-fleming.md"
    path.write_text((ws.history_dir / "alexander-fleming" / "1.md").read_text())  # the old file won the race
    (ws.pages_dir / "hidden-person.md").unlink()
    result = kompl("pages", "--json")
    assert result.exit_code == 0
    assert "in 1928" in path.read_text()
    assert (ws.pages_dir / "hidden-person.md").exists()


def test_a_hand_edit_taken_in_at_start_is_searchable_at_once(kompl, wiki, ws):
    path = ws.pages_dir / "alexander-fleming.md"
    path.write_text(path.read_text() + "\nHe also kept a notebook of zymotic observations.\n")
    assert kompl("pages").exit_code == 0  # any command takes the edit in
    from kompl.vectors import VectorIndex

    hits = VectorIndex(ws).query("zymotic observations notebook", k=3)
    assert hits and hits[0].page_id == wiki["page_id"] and "zymotic" in hits[0].text
