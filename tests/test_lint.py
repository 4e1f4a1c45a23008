"""kompl lint on the compiled bundled example: planted problems are found, --fix repairs, runs are stored."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from kompl import db
from kompl.demo import example_dir
from kompl.workspace import find_workspace

WINDOW_SRC = "01-fleming-discovery.md"
MYTH_SRC = "06-window-myth.md"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The bundled example, compiled and approved once (compiling costs seconds); tests work on copies."""
    from kompl.cli.main import app

    home = tmp_path_factory.mktemp("lint") / "wiki"
    runner = CliRunner()
    for args in (["init"], ["ingest", str(example_dir()), "--json"], ["compile", "--json"], ["approve", "--all", "--json"]):
        result = runner.invoke(app, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    return home


@pytest.fixture
def wiki(example, tmp_path):
    """(workspace, connection, run) on a private copy of the compiled example."""
    from kompl.cli.main import app

    home = tmp_path / "copy"
    shutil.copytree(example, home)
    ws = find_workspace(home)
    conn = db.connect(ws.db_path)
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["--home", str(home), *map(str, args)], catch_exceptions=False)

    yield ws, conn, run
    conn.close()


def source_id(conn, file_name: str) -> str:
    row = conn.execute("SELECT source_id FROM sources WHERE input LIKE ?", (f"%{file_name}",)).fetchone()
    return row[0]


def lint_json(run, *args) -> tuple[int, dict]:
    result = run("lint", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def found(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def commit_page(ws, conn, key: str, title: str, body: str, sources=(), aliases=(), text=None):
    from kompl.wiki import store

    page, _ = store.commit_version(ws, conn, store.PageWrite(
        page_key=key, page_type=key.partition(":")[0], title=title, body=body,
        sources=[(s, "cited") for s in sources], author="test", aliases=tuple(aliases)), text=text)
    return page


def edit_page(ws, conn, title: str, extra: str) -> dict:
    """A new version of an existing page with `extra` appended to its body (through the store)."""
    from kompl.wiki import store

    page = store.get(conn, title)
    body = store.content(conn, page["page_id"]).split("\n---\n", 1)[1]
    return commit_page(ws, conn, page["page_key"], page["title"], body + "\n" + extra + "\n",
                       sources=store.page_source_ids(conn, page["page_id"]), aliases=page["aliases"])


def test_example_finds_the_planted_contradiction_with_both_quotes(wiki):
    ws, conn, run = wiki
    code, report = lint_json(run)
    assert {"findings", "checked_at", "counts", "run_id"} <= set(report)
    assert report["checked"]["pages"] >= 20 and report["errors"] == []
    for f in report["findings"]:
        assert {"check", "severity", "page_id", "message"} <= set(f) and f["severity"] in ("error", "warning", "info")
    contradictions = found(report, "contradiction")
    window, myth = source_id(conn, WINDOW_SRC), source_id(conn, MYTH_SRC)
    pair = [c for c in contradictions if {c["details"]["a"]["source_id"], c["details"]["b"]["source_id"]} == {window, myth}]
    assert pair, contradictions
    d = pair[0]["details"]
    quotes = {d["a"]["source_id"]: d["a"]["quote"], d["b"]["source_id"]: d["b"]["quote"]}
    assert "window" in quotes[window].lower() and "window" in quotes[myth].lower()
    assert d["a"]["source_title"] and d["b"]["source_title"]
    # an approved comparison page covers it: reported, but only as info
    assert d["covered"] is True and pair[0]["severity"] == "info"
    assert "conflicting accounts" in pair[0]["page_title"]
    # the compiled example is otherwise clean: nothing but info findings, exit 0
    assert {f["severity"] for f in report["findings"]} == {"info"}
    assert code == 0


def test_planted_broken_link_and_orphan_are_found_exit_1(wiki):
    ws, conn, run = wiki
    sid = source_id(conn, WINDOW_SRC)
    edited = edit_page(ws, conn, "Ernst Chain", "See also [[No Such Page]] for more.")
    orphan = commit_page(ws, conn, "entity:ent-zebra", "Zebra Finch Studies", "A page nobody links to.", sources=[sid])
    code, report = lint_json(run)
    assert code == 1
    broken = found(report, "broken_link")
    assert [(f["page_id"], f["details"]["link"]) for f in broken] == [(edited["page_id"], "No Such Page")]
    assert broken[0]["severity"] == "warning" and not broken[0]["fixed"]
    orphans = {f["page_id"] for f in found(report, "orphan_page")}
    assert orphan["page_id"] in orphans
    # overviews are entry points, never orphans
    overview_ids = {r[0] for r in conn.execute("SELECT page_id FROM pages WHERE page_type = 'overview'")}
    assert overview_ids and not overview_ids & orphans
    # the text table groups by check and exits the same way
    text = run("lint")
    assert text.exit_code == 1 and "broken_link" in text.stdout and "No Such Page" in text.stdout


def test_pages_without_active_sources_or_provenance(wiki):
    from kompl.lint import run_lint
    from kompl.wiki import store

    ws, conn, _run = wiki
    timeline = source_id(conn, "05-timeline.csv")
    with db.transaction(conn):
        conn.execute("UPDATE sources SET status = 'archived' WHERE source_id = ?", (timeline,))
    gone = commit_page(ws, conn, "entity:ent-gone", "Gone Source Topic", "Said by a deleted source.",
                       sources=["src-0000deadbeef"])
    bare = commit_page(ws, conn, "entity:ent-bare", "Unsourced Topic", "Nobody said this.")
    report = run_lint(ws, conn, checks=["sources_inactive", "no_provenance"])
    inactive = {f["page_id"]: f for f in report.findings if f["check"] == "sources_inactive"}
    timeline_page = store.get_by_key(conn, f"source:{timeline}")
    assert inactive[timeline_page["page_id"]]["details"]["archived"] == [timeline]
    assert "hidden" in inactive[timeline_page["page_id"]]["message"]
    assert inactive[timeline_page["page_id"]]["severity"] == "info"  # archiving was a choice; the page is hidden
    assert inactive[gone["page_id"]]["details"]["deleted"] == ["src-0000deadbeef"]
    assert inactive[gone["page_id"]]["severity"] == "warning"
    assert [f["page_id"] for f in report.findings if f["check"] == "no_provenance"] == [bare["page_id"]]
    assert report.exit_code == 1


def test_invalid_frontmatter_is_an_error(wiki):
    from kompl.lint import run_lint

    ws, conn, _run = wiki
    sid = source_id(conn, WINDOW_SRC)
    bad_yaml = commit_page(ws, conn, "entity:ent-yaml", "Bad Yaml", "", sources=[sid],
                           text="---\ntitle: [unclosed\n---\nBody.\n")
    missing = commit_page(ws, conn, "entity:ent-miss", "Missing Fields", "", sources=[sid],
                          text="---\ntitle: Missing Fields\npage_type: entity\n---\nBody.\n")
    wrong = commit_page(ws, conn, "entity:ent-wrong", "Right Title", "", sources=[sid], text=(
        "---\ntitle: Wrong Title\npage_type: concept\ncategory: other\nsummary: s\nsources: [src-other]\n"
        "model: test\nupdated: now\n---\nBody.\n"))
    report = run_lint(ws, conn, checks=["invalid_frontmatter"])
    by_page = {f["page_id"]: f for f in report.findings}
    assert set(by_page) == {bad_yaml["page_id"], missing["page_id"], wrong["page_id"]}
    assert all(f["severity"] == "error" for f in report.findings)
    assert "does not parse" in by_page[bad_yaml["page_id"]]["message"]
    assert {"category", "summary", "sources"} <= set(by_page[missing["page_id"]]["details"]["missing"])
    assert set(by_page[wrong["page_id"]]["details"]["disagrees"]) == {"title", "page_type", "sources"}


def test_stale_duplicate_and_missing_pages(wiki):
    from kompl.lint import run_lint
    from kompl.pipeline import resolve
    from kompl.wiki import store

    ws, conn, _run = wiki
    sid = source_id(conn, MYTH_SRC)
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    with db.transaction(conn):
        conn.execute("UPDATE extractions SET extracted_at = ? WHERE source_id = ?", (later, sid))
    resolve.merge(conn, "Oxford", "University of Oxford")
    ws.settings.entity_promotion_threshold = 1
    report = run_lint(ws, conn, checks=["stale_page", "duplicate_entity", "missing_page"])
    stale = {f["page_id"]: f for f in report.findings if f["check"] == "stale_page"}
    myth_page = store.get_by_key(conn, f"source:{sid}")
    assert myth_page["page_id"] in stale and stale[myth_page["page_id"]]["details"]["re_extracted"] == [sid]
    dupes = [f for f in report.findings if f["check"] == "duplicate_entity"]
    titles = {store.get(conn, f["page_id"])["title"] for f in dupes} | {
        store.get(conn, f["details"]["duplicate_of"])["title"] for f in dupes}
    assert {"Oxford", "University of Oxford"} <= titles
    missing = [f for f in report.findings if f["check"] == "missing_page"]
    assert missing and all(f["page_id"] is None and f["details"]["sources"] for f in missing)


def test_fix_repairs_a_deleted_page_file_and_a_link_that_became_valid(wiki):
    from kompl.lint import run_lint
    from kompl.wiki import store

    ws, conn, _run = wiki
    sid = source_id(conn, WINDOW_SRC)
    # Written before its target existed; the index compares titles ASCII-case-insensitively, so
    # the later page "Pasteur études" does not repair it on its own.
    linking = edit_page(ws, conn, "Ronald Hare", "He read [[PASTEUR ÉTUDES]] closely.")
    target = commit_page(ws, conn, "entity:ent-ecole", "Pasteur études", "Ronald Hare read it.", sources=[sid])
    victim = store.get(conn, "Norman Heatley")
    store.page_path(ws, victim["slug"]).unlink()

    report = run_lint(ws, conn)
    assert [(f["details"]["link"], f["details"]["resolves_to"]) for f in report.findings
            if f["check"] == "broken_link"] == [("PASTEUR ÉTUDES", "Pasteur études")]
    assert any(f["check"] == "drift" and f["details"]["problem"] == "missing_file" and f["page_id"] == victim["page_id"]
               for f in report.findings)
    assert not store.page_path(ws, victim["slug"]).exists()  # reporting changes nothing

    fixed = run_lint(ws, conn, fix=True)
    done = {(f["check"], f["page_id"]) for f in fixed.findings if f["fixed"]}
    assert ("broken_link", linking["page_id"]) in done and ("drift", victim["page_id"]) in done
    assert store.page_path(ws, victim["slug"]).read_text() == store.content(conn, victim["page_id"])
    page = store.get(conn, linking["page_id"])
    text = store.content(conn, page["page_id"])
    assert "[[Pasteur études|PASTEUR ÉTUDES]]" in text and "closely." in text
    assert store.history(conn, page["page_id"])[-1]["author"] == store.LINKER
    links = conn.execute("SELECT to_page FROM page_links WHERE from_page = ? AND to_title = ?",
                         (page["page_id"], "Pasteur études")).fetchall()
    assert [r[0] for r in links] == [target["page_id"]]
    again = run_lint(ws, conn)
    assert not [f for f in again.findings if f["check"] in ("broken_link", "drift")]


def test_if_due_skips_when_recent_and_runs_when_old(wiki):
    ws, conn, run = wiki
    first = run("lint", "--json")
    assert first.exit_code == 0
    runs = lambda: conn.execute("SELECT COUNT(*) FROM lint_runs").fetchone()[0]  # noqa: E731
    assert runs() == 1
    skipped = run("lint", "--if-due")
    assert skipped.exit_code == 0 and "not due" in skipped.stdout and "36 h" in skipped.stdout
    assert runs() == 1
    # a partial run (--check) does not count as the lint
    with db.transaction(conn):
        conn.execute("UPDATE lint_runs SET started_at = ?, finished_at = ?",
                     ((datetime.now(timezone.utc) - timedelta(hours=40)).isoformat(),) * 2)
    assert run("lint", "--check", "orphan_page", "--json").exit_code == 0
    ran = run("lint", "--if-due", "--json")
    assert ran.exit_code == 0 and "findings" in json.loads(ran.stdout)
    assert runs() == 3
    again = json.loads(run("lint", "--if-due", "--json").stdout)
    assert again["skipped"] is True and again["interval_hours"] == 36


def test_last_replays_the_stored_run_and_the_audit_row(wiki):
    ws, conn, run = wiki
    assert run("lint", "--last").exit_code == 2  # nothing stored yet
    edit_page(ws, conn, "Ernst Chain", "See [[Nowhere At All]].")
    code, report = lint_json(run)
    assert code == 1
    replay = run("lint", "--last", "--json")
    assert replay.exit_code == 1
    stored = json.loads(replay.stdout)
    assert stored["run_id"] == report["run_id"] and stored["checked_at"] == report["checked_at"]
    assert stored["findings"] == report["findings"] and stored["counts"] == report["counts"]
    assert conn.execute("SELECT COUNT(*) FROM lint_runs").fetchone()[0] == 1
    audit = db.activity(conn, action="lint")
    assert len(audit) == 1 and audit[0]["details"]["run_id"] == report["run_id"]
    assert audit[0]["details"]["findings"] == report["counts"]["remaining"]


def test_empty_workspace_is_clean(kompl):
    result = kompl("lint", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["findings"] == [] and report["counts"]["remaining"] == 0
    assert kompl("lint").exit_code == 0


def test_unknown_check_is_a_usage_error(kompl):
    result = kompl("lint", "--check", "spelling")
    assert result.exit_code == 2
