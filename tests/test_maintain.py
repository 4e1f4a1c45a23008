"""archive / unarchive / delete / recompile on the bundled example, offline: what a source leaves behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kompl.demo import example_dir

# Sentences only 04-albert-alexander.txt says.
PLANTED = ("43-year-old police constable", "recovered penicillin from the patient's urine")
PATIENT_FILE = "04-albert-alexander.txt"


def _run(home: Path, *args, input: str | None = None):
    from kompl.cli.main import app

    return CliRunner().invoke(app, ["--home", str(home), *map(str, args)], input=input, catch_exceptions=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(compiled with drafts waiting, compiled and approved): built once, copied by each test."""
    base = tmp_path_factory.mktemp("maintain")
    drafted = base / "drafted"
    assert _run(drafted, "init").exit_code == 0
    assert _run(drafted, "ingest", example_dir(), "--json").exit_code == 0
    assert _run(drafted, "compile", "--json").exit_code == 0
    approved = base / "approved"
    shutil.copytree(drafted, approved)
    result = _run(approved, "approve", "--all")
    assert result.exit_code == 0, result.output
    return drafted, approved


def _copy(src: Path, tmp_path: Path) -> Path:
    home = tmp_path / "wiki"
    shutil.copytree(src, home)
    return home


def _open(home: Path):
    from kompl import db
    from kompl.workspace import find_workspace

    ws = find_workspace(home)
    return ws, db.connect(ws.db_path)


def _patient(conn) -> dict:
    row = conn.execute("SELECT * FROM sources WHERE input LIKE ?", (f"%{PATIENT_FILE}",)).fetchone()
    return dict(row)


def _carries(text: str | None) -> bool:
    low = (text or "").casefold()
    return any(p.casefold() in low for p in PLANTED)


def _readers_show(ws, conn) -> list[str]:
    """Where a reader still sees a planted sentence: search, ask, MCP tools."""
    from kompl.mcp_server import tools
    from kompl.read.ask import ask
    from kompl.read.search import search
    from kompl.wiki import store

    seen = []
    for query in ("police constable", "patient's urine", "Albert Alexander first patient"):
        for hit in search(ws, conn, query, limit=20).hits:
            if _carries(hit.snippet) or _carries(store.content(conn, hit.page_id)):
                seen.append(f"search {query!r}: {hit.title}")
        answer = ask(ws, conn, f"Who was the {query}?")
        if _carries(answer.answer):
            seen.append(f"ask {query!r}")
        t = tools(ws)
        for found in t["search_wiki"](query, limit=20)["results"]:
            if _carries(found["snippet"]) or _carries(t["read_page"](str(found["page_id"]))["content"]):
                seen.append(f"mcp search {query!r}: {found['title']}")
    t = tools(ws)
    for page in t["list_pages"](limit=500)["pages"]:
        if _carries(t["read_page"](str(page["page_id"]))["content"]) or _carries(page["summary"]):
            seen.append(f"mcp read_page {page['title']}")
    return seen


# --- archive / unarchive ---------------------------------------------------------------------------

def test_archive_takes_its_text_out_of_every_reader_and_unarchive_brings_it_back(built, tmp_path):
    home = _copy(built[1], tmp_path)
    ws, conn = _open(home)
    sid = _patient(conn)["source_id"]
    assert _readers_show(ws, conn), "the planted sentences should be visible before archiving"

    result = _run(home, "archive", PATIENT_FILE, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"]["source_id"] == sid and report["changed"]
    assert {p["title"] for p in report["hidden_pages"]} == {"The First Patient: Albert Alexander"}
    assert "Albert Alexander" in {p["title"] for p in report["redacted_pages"]}

    assert _readers_show(ws, conn) == []
    from kompl.errors import NotFoundError
    from kompl.mcp_server import tools

    with pytest.raises(NotFoundError):
        tools(ws)["get_source"](sid)
    assert tools(ws)["wiki_stats"]()["sources"]["archived"] == 1
    # The page shared with the timeline stays, with the timeline's statements only.
    text = (ws.pages_dir / "albert-alexander.md").read_text()
    assert "src-40072374d311" in text and sid not in text and not _carries(text)
    # One audit row; history keeps the earlier versions.
    rows = conn.execute("SELECT details FROM activity WHERE action = 'archive' AND target = ?", (sid,)).fetchall()
    assert len(rows) == 1
    assert conn.execute("SELECT COUNT(*) FROM page_versions WHERE content LIKE '%police constable%'").fetchone()[0]

    # Nothing pending would bring it back, and planning again does not either.
    assert json.loads(_run(home, "plan", "--json").stdout)["plans"] == 0
    for plan in conn.execute("SELECT inputs, draft FROM page_plans WHERE status IN ('planned','drafted','failed')"):
        assert sid not in json.loads(plan[0]).get("sources", []) and not _carries(plan[1])

    # Archiving twice changes nothing more.
    again = json.loads(_run(home, "archive", sid, "--json").stdout)
    assert not again["changed"] and again["redacted_pages"] == []

    result = _run(home, "unarchive", sid, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["restored_pages"]
    assert _readers_show(ws, conn), "unarchive should bring the statements back"
    restored = (ws.pages_dir / "albert-alexander.md").read_text()
    original = (built[1] / "data" / "pages" / "albert-alexander.md").read_text()
    strip = lambda t: [line for line in t.splitlines() if not line.startswith("updated:")]
    assert strip(restored) == strip(original)
    conn.close()


def test_archive_supersedes_drafts_that_read_it_and_it_stops_counting_for_promotion(built, tmp_path):
    home = _copy(built[0], tmp_path)  # compiled, drafts waiting for review
    ws, conn = _open(home)
    sid = _patient(conn)["source_id"]
    drafts = json.loads(_run(home, "drafts", "--json").stdout)
    titles = {d["title"] for d in drafts}
    assert {"Albert Alexander", "Charles Fletcher", "The First Patient: Albert Alexander"} <= titles

    report = json.loads(_run(home, "archive", sid, "--json").stdout)
    assert report["plans_superseded"]
    drafts = json.loads(_run(home, "drafts", "--json").stdout)
    for d in drafts:
        assert sid not in d["sources"], d
    titles = {d["title"] for d in drafts}
    # Mentioned by it and the timeline only: below the promotion threshold (2) without it.
    assert not {"Albert Alexander", "Charles Fletcher", "The First Patient: Albert Alexander"} & titles
    for row in conn.execute("SELECT draft FROM page_plans WHERE status IN ('planned','drafted','failed')"):
        assert not _carries(row[0])
    # A full plan run does not bring them back either.
    created = json.loads(_run(home, "plan", "--json").stdout)["created"]
    assert not {"Albert Alexander", "Charles Fletcher"} & {c["title"] for c in created}
    # Approving everything that waits publishes none of its sentences.
    assert _run(home, "approve", "--all").exit_code == 0
    for path in ws.pages_dir.glob("*.md"):
        assert not _carries(path.read_text()), path.name
    conn.close()


# --- delete ---------------------------------------------------------------------------------------------

def _assert_deleted_cleanly(ws, conn, source: dict) -> None:
    from kompl.vectors import VectorIndex

    sid = source["source_id"]
    assert conn.execute("SELECT 1 FROM sources WHERE source_id = ?", (sid,)).fetchone() is None
    for table in ("entity_mentions", "claims", "relationship_mentions", "extractions"):
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE source_id = ?", (sid,)).fetchone()[0] == 0, table
    # No page, FTS row, open draft, vector or file carries its sentences.
    for (body,) in conn.execute("SELECT body FROM pages_fts"):
        assert not _carries(body)
    for plan_id, draft in conn.execute("SELECT plan_id, draft FROM page_plans"
                                       " WHERE status IN ('planned', 'drafted', 'failed')"):
        assert not _carries(draft), plan_id
    for path in ws.pages_dir.glob("*.md"):
        assert not _carries(path.read_text()), path.name
        assert sid not in path.read_text(), path.name
    for query in ("police constable", "recovered penicillin from the patient's urine"):
        for hit in VectorIndex(ws).query(query, k=50):
            assert not _carries(hit.text), hit
    assert _readers_show(ws, conn) == []
    # Its own page is deleted, its history kept; shared pages stay without it.
    page = conn.execute("SELECT page_id, slug, status FROM pages WHERE page_key = ?", (f"source:{sid}",)).fetchone()
    assert page["status"] == "deleted"
    assert not (ws.pages_dir / f"{page['slug']}.md").exists()
    assert list((ws.history_dir / page["slug"]).glob("*.md"))
    shared = conn.execute("SELECT page_id, status FROM pages WHERE title = 'Albert Alexander'").fetchone()
    assert shared["status"] == "active"
    assert conn.execute("SELECT COUNT(*) FROM page_sources ps JOIN pages p USING (page_id)"
                        " WHERE ps.source_id = ? AND p.status = 'active'", (sid,)).fetchone()[0] == 0
    # Its files are gone.
    assert not (ws.raw_dir / f"{sid}.md.gz").exists()
    assert not (ws.originals_dir / source["original_name"]).exists()


def test_delete_removes_what_only_it_supported_and_replans_shared_pages(built, tmp_path):
    home = _copy(built[1], tmp_path)
    ws, conn = _open(home)
    source = _patient(conn)
    sid = source["source_id"]

    result = _run(home, "delete", PATIENT_FILE, "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {p["title"] for p in report["deleted_pages"]} == {"The First Patient: Albert Alexander"}
    assert "Albert Alexander" in {p["title"] for p in report["redacted_pages"]}
    _assert_deleted_cleanly(ws, conn, source)

    # Shared pages were re-planned without it and re-drafted at once (the draft cites none of it).
    created = {p["plan_id"] for p in report["plans_created"]}
    plans = [dict(r) for r in conn.execute("SELECT plan_id, title, status, inputs, draft FROM page_plans")
             if r["plan_id"] in created]
    assert "Albert Alexander" in {p["title"] for p in plans}
    for plan in plans:
        inputs = json.loads(plan["inputs"])
        assert inputs["removed_sources"] == [sid] and sid not in inputs["sources"]
        assert plan["status"] in ("drafted", "noop") and sid not in (plan["draft"] or "")
    text = (ws.pages_dir / "albert-alexander.md").read_text()
    assert "src-40072374d311" in text  # the timeline's statement stays

    audit = [r for r in conn.execute("SELECT details FROM activity WHERE action = 'delete' AND target = ?", (sid,))]
    assert len(audit) == 1
    assert json.loads(audit[0][0])["deleted_pages"]
    # Nothing left for planning to bring back.
    assert json.loads(_run(home, "plan", "--json").stdout)["plans"] == 0
    conn.close()


def test_reingesting_the_same_bytes_after_delete_starts_clean(built, tmp_path):
    home = _copy(built[1], tmp_path)
    ws, conn = _open(home)
    source = _patient(conn)
    sid = source["source_id"]
    assert _run(home, "delete", sid, "--yes").exit_code == 0

    result = _run(home, "ingest", Path(example_dir()) / PATIENT_FILE, "--json")
    assert result.exit_code == 0, result.output
    fresh = _patient(conn)
    assert fresh["source_id"] == sid and fresh["ingested_at"] > source["ingested_at"]
    assert conn.execute("SELECT COUNT(*) FROM extractions WHERE source_id = ?", (sid,)).fetchone()[0] == 0
    result = _run(home, "compile", "--json")
    assert result.exit_code == 0, result.output
    assert sid in json.loads(result.stdout)["sources"]  # extracted again
    assert conn.execute("SELECT COUNT(*) FROM claims WHERE source_id = ?", (sid,)).fetchone()[0] > 0
    drafts = json.loads(_run(home, "drafts", "--json").stdout)
    assert any(d["page_key"] == f"source:{sid}" for d in drafts)
    # The shared entity page takes it in again as a new source.
    assert any(d["title"] == "Albert Alexander" and sid in d["new_sources"] for d in drafts)
    assert _run(home, "approve", "--all").exit_code == 0
    page = conn.execute("SELECT status, version FROM pages WHERE page_key = ?", (f"source:{sid}",)).fetchone()
    assert page["status"] == "active" and page["version"] > 1  # revived, history continued
    assert _readers_show(ws, conn)
    conn.close()


@pytest.mark.parametrize("step", ["_replan", "_delete_row", "_remove_files"])
def test_delete_interrupted_at_any_step_completes_when_run_again(built, tmp_path, monkeypatch, step):
    from kompl import maintain

    home = _copy(built[1], tmp_path)
    ws, conn = _open(home)
    source = _patient(conn)
    sid = source["source_id"]

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(maintain, step, crash)
    with pytest.raises(RuntimeError):
        maintain.delete(ws, conn, sid)
    monkeypatch.undo()
    # Whatever step it died at, the source is already out of every read path.
    assert _readers_show(ws, conn) == []

    result = _run(home, "delete", sid, "--yes", "--json")
    assert result.exit_code == 0, result.output
    _assert_deleted_cleanly(ws, conn, source)
    # A third run finds nothing left to do.
    again = json.loads(_run(home, "delete", sid, "--yes", "--json").stdout)
    assert not again["changed"] and again["deleted_pages"] == [] and again["redacted_pages"] == []
    conn.close()


def test_delete_prunes_names_only_it_gave_but_keeps_manual_merges(ws, kompl, tmp_path):
    (tmp_path / "a.txt").write_text("Zebulon Quartermaine founded the Quartermaine Foundry in Leeds in 1821. "
                                    "Ada Lovelace wrote about engines.\n" * 3)
    (tmp_path / "b.txt").write_text("Ada Lovelace wrote the first published algorithm in 1843 in London.\n" * 3)
    assert kompl("ingest", tmp_path / "a.txt", tmp_path / "b.txt").exit_code == 0
    assert kompl("extract").exit_code == 0
    assert kompl("resolve").exit_code == 0
    _ws, conn = _open(ws.root)
    names = {r[0] for r in conn.execute("SELECT alias FROM aliases")}
    assert any("Zebulon" in n for n in names) and any("Lovelace" in n for n in names)
    a = conn.execute("SELECT source_id FROM sources WHERE input LIKE '%a.txt'").fetchone()[0]

    result = kompl("delete", a, "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert any("Zebulon" in p["alias"] for p in report["aliases_pruned"])
    assert report["entities_pruned"]
    names = {r[0] for r in conn.execute("SELECT alias FROM aliases")}
    assert not any("Zebulon" in n for n in names)
    assert any("Lovelace" in n for n in names)  # still mentioned by b.txt
    live = {r[0] for r in conn.execute("SELECT entity_id FROM entities")}
    assert all(r[0] in live for r in conn.execute("SELECT entity_id FROM aliases"))
    assert kompl("resolve").exit_code == 0  # the entity tables are still consistent
    conn.close()


# --- the command line --------------------------------------------------------------------------------------

def test_unknown_ambiguous_and_unconfirmed_sources_are_refused(built, tmp_path):
    home = _copy(built[1], tmp_path)
    for command in ("archive", "unarchive", "delete", "recompile"):
        result = _run(home, command, "no-such-source", "--yes" if command == "delete" else "--json")
        assert result.exit_code == 2 and "No source matches" in result.output, (command, result.output)
        assert "Traceback" not in result.output
    result = _run(home, "archive", "the")
    assert result.exit_code == 2 and "matches" in result.output and "sources" in result.output
    # No terminal and no --yes: nothing is deleted.
    result = _run(home, "delete", PATIENT_FILE)
    assert result.exit_code == 2 and "--yes" in result.output
    _ws, conn = _open(home)
    assert _patient(conn)["status"] == "active"
    conn.close()


def test_recompile_re_extracts_one_source(built, tmp_path):
    home = _copy(built[1], tmp_path)
    _ws, conn = _open(home)
    sid = _patient(conn)["source_id"]
    stamps = dict(conn.execute("SELECT source_id, extracted_at FROM extractions").fetchall())
    before = stamps[sid]
    result = _run(home, "recompile", sid, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [e["source_id"] for e in report["stages"]["extract"]["extracted"]] == [sid]
    assert {"extract", "resolve", "conflicts", "plan"} <= set(report["stages"])
    after = conn.execute("SELECT extracted_at FROM extractions WHERE source_id = ?", (sid,)).fetchone()[0]
    assert after > before
    now = dict(conn.execute("SELECT source_id, extracted_at FROM extractions").fetchall())
    assert {s for s in now if now[s] != stamps[s]} == {sid}  # only that one
    assert _run(home, "archive", sid).exit_code == 0
    result = _run(home, "recompile", sid)
    assert result.exit_code == 2 and "unarchive" in result.output
    conn.close()
