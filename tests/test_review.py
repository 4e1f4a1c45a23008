"""The outbox: listing drafts, diffs, approve (commit, versions, links, stale drafts), reject, and the CLI contracts."""

from __future__ import annotations

import json
import sys
import types

from test_plan import FLEMING, FLOREY, add_source, draft_all, entity_id, open_plans

from kompl import db
from kompl import review as V
from kompl.pipeline import plan as P
from kompl.wiki import store as wiki


def _planned(ws, conn, n: int = 2, entities=(FLEMING,)) -> list[str]:
    ids = [add_source(ws, conn, f"Source {i}", entities=list(entities)) for i in range(n)]
    P.plan_pending(ws, conn)
    draft_all(conn)
    return ids


def _key(conn) -> str:
    return f"entity:{entity_id(conn, 'Alexander Fleming')}"


# --- approve -------------------------------------------------------------------------------------------

def test_approve_commits_version_1_then_2_and_every_version_is_retrievable(ws, conn):
    s1, s2 = _planned(ws, conn)
    report = V.approve(ws, conn, V.ALL)
    assert not report.failed and len(report.approved) == 3
    page = wiki.get_by_key(conn, _key(conn))
    assert page["version"] == 1
    assert dict(conn.execute("SELECT source_id, contribution FROM page_sources WHERE page_id=?", (page["page_id"],))) \
        == {s1: "mention", s2: "mention"}
    src_page = wiki.get_by_key(conn, f"source:{s1}")
    assert wiki.page_source_ids(conn, src_page["page_id"]) == [s1]
    assert conn.execute("SELECT contribution FROM page_sources WHERE page_id=?", (src_page["page_id"],)).fetchone()[0] \
        == "summary"

    s3 = add_source(ws, conn, "Source 3", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn, body=lambda p: f"Updated notes about {p['title']} with {p['inputs']['new_sources']}.")
    update = open_plans(conn)[_key(conn)]
    report = V.approve(ws, conn, [update["plan_id"]])
    assert [a["version"] for a in report.approved] == [2]
    page = wiki.get_by_key(conn, _key(conn))
    assert page["version"] == 2 and set(wiki.page_source_ids(conn, page["page_id"])) == {s1, s2, s3}
    v1, v2 = wiki.content(conn, page["page_id"], 1), wiki.content(conn, page["page_id"], 2)
    assert "Notes about Alexander Fleming." in v1 and "Updated notes" in v2
    assert [h["plan_id"] for h in wiki.history(conn, page["page_id"])][-1] == update["plan_id"]
    assert P.get_plan(conn, update["plan_id"])["status"] == "approved"
    assert any(a["details"]["plan_id"] == update["plan_id"] for a in db.activity(conn, action="approve"))
    # Approved: nothing left to plan for these pages.
    assert not any(c["page_key"] == _key(conn) for c in P.plan_pending(ws, conn).created)


def test_a_stale_draft_is_not_committed_but_replanned(ws, conn):
    _planned(ws, conn)
    V.approve(ws, conn, V.ALL)
    add_source(ws, conn, "Source 3", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn)
    stale = open_plans(conn)[_key(conn)]
    page = wiki.get_by_key(conn, _key(conn))
    wiki.commit_version(ws, conn, wiki.PageWrite(_key(conn), "entity", page["title"], "A person rewrote this.",
                                                 [], author="human"))
    report = V.approve(ws, conn, [stale["plan_id"]])
    assert not report.approved and report.stale[0]["plan_id"] == stale["plan_id"]
    after = wiki.get_by_key(conn, _key(conn))
    assert after["version"] == 2 and "A person rewrote this." in wiki.content(conn, after["page_id"])
    assert P.get_plan(conn, stale["plan_id"])["status"] == "superseded"
    fresh = open_plans(conn)[_key(conn)]
    assert report.stale[0]["replanned"] == [fresh["plan_id"]] and fresh["base_version"] == 2


def test_a_draft_equal_to_the_page_is_a_noop(ws, conn):
    _planned(ws, conn, n=1)
    V.approve(ws, conn, V.ALL)
    done = conn.execute("SELECT * FROM page_plans WHERE status='approved' LIMIT 1").fetchone()
    page = wiki.get_by_key(conn, done["page_key"])
    cur = conn.execute(
        "INSERT INTO page_plans (page_key, page_type, title, category, action, page_id, base_version, status,"
        " inputs_hash, inputs, draft, summary, model, created_at, updated_at)"
        " VALUES (?,?,?,?,'update',?,?,'drafted','x',?,?,?,?,?,?)",
        (done["page_key"], done["page_type"], done["title"], done["category"], page["page_id"], page["version"],
         done["inputs"], done["draft"], done["summary"], done["model"], db.utcnow(), db.utcnow()))
    report = V.approve(ws, conn, [cur.lastrowid])
    assert report.noop and not report.approved
    assert P.get_plan(conn, cur.lastrowid)["status"] == "noop"
    assert wiki.get_by_key(conn, done["page_key"])["version"] == 1


def test_one_failing_plan_does_not_stop_the_others(ws, conn):
    _planned(ws, conn, n=1)
    plan_id = next(iter(open_plans(conn).values()))["plan_id"]
    report = V.approve(ws, conn, [999, plan_id])
    assert [f["plan_id"] for f in report.failed] == [999]
    assert [a["plan_id"] for a in report.approved] == [plan_id]


def test_a_planned_plan_without_a_draft_cannot_be_approved(ws, conn):
    add_source(ws, conn, "Source")
    P.plan_pending(ws, conn)
    plan_id = next(iter(open_plans(conn).values()))["plan_id"]
    report = V.approve(ws, conn, [plan_id])
    assert report.failed and "not a draft" in report.failed[0]["error"]


def test_new_pages_are_linked_from_older_pages(ws, conn):
    a = add_source(ws, conn, "Source 0", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn, body=lambda p: "Alexander Fleming saw mould on a plate.")
    V.approve(ws, conn, V.ALL)
    add_source(ws, conn, "Source 1", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn, body=lambda p: f"Notes about {p['title']}.")
    report = V.approve(ws, conn, V.ALL)
    old = wiki.get_by_key(conn, f"source:{a}")
    assert old["page_id"] in report.linked
    assert "[[Alexander Fleming]]" in wiki.content(conn, old["page_id"])
    assert wiki.history(conn, old["page_id"])[-1]["author"] == wiki.LINKER


def test_vectors_are_synced_when_the_module_exists(ws, conn, monkeypatch):
    _planned(ws, conn, n=1)
    calls = []
    fake = types.ModuleType("kompl.vectors")
    fake.sync_pages = lambda ws_, conn_, ids: calls.append(list(ids)) or {"upserted": len(ids)}
    monkeypatch.setitem(sys.modules, "kompl.vectors", fake)
    report = V.approve(ws, conn, V.ALL)
    assert calls == [sorted(a["page_id"] for a in report.approved)]
    assert report.vectors == {"upserted": 1}


def test_vectors_missing_is_a_note_not_a_failure(ws, conn, monkeypatch):
    _planned(ws, conn, n=1)
    monkeypatch.setitem(sys.modules, "kompl.vectors", None)  # import fails
    report = V.approve(ws, conn, V.ALL)
    assert report.approved and not report.failed and "skipped" in report.vectors


def test_auto_approve_only_when_the_setting_is_on(ws, conn):
    _planned(ws, conn, n=1)
    assert V.approve_all_if_auto(ws, conn) is None
    ws.settings.auto_approve = True
    assert V.approve_all_if_auto(ws, conn).approved


# --- reject, reviewer -----------------------------------------------------------------------------------

def test_reject_closes_the_plan_and_leaves_a_tombstone(ws, conn):
    _planned(ws, conn, n=1)
    plan = next(iter(open_plans(conn).values()))
    report = V.reject(conn, [plan["plan_id"]], "wrong focus")
    assert report.rejected[0]["plan_id"] == plan["plan_id"]
    row = P.get_plan(conn, plan["plan_id"])
    assert row["status"] == "rejected" and row["decided_reason"] == "wrong focus" and row["decided_at"]
    assert P.is_tombstoned(conn, plan["page_key"], plan["inputs_hash"])
    assert db.activity(conn, action="reject")[0]["details"]["reason"] == "wrong focus"
    again = V.reject(conn, [plan["plan_id"]], "twice")
    assert again.failed and not again.rejected


class ScriptedReviewer:
    """Plays back verdicts, like beets' ImportSessionFixture."""

    def __init__(self, *verdicts):
        self.verdicts = list(verdicts)
        self.seen = []

    def judge(self, draft):
        self.seen.append(draft.plan_id)
        return self.verdicts.pop(0)

    def reason(self, draft):
        return "scripted no"

    def edit(self, draft):
        return "Edited by the reviewer."


def test_review_outbox_carries_out_the_reviewers_verdicts(ws, conn):
    add_source(ws, conn, "A")
    add_source(ws, conn, "B")
    add_source(ws, conn, "C")
    P.plan_pending(ws, conn)
    draft_all(conn)
    reviewer = ScriptedReviewer(V.Verdict.APPROVE, V.Verdict.REJECT, V.Verdict.EDIT)
    summary = V.review_outbox(ws, conn, reviewer)
    assert len(summary.approve.approved) == 2 and len(summary.reject.rejected) == 1
    edited = P.get_plan(conn, reviewer.seen[2])
    page = wiki.get_by_key(conn, edited["page_key"])
    assert "Edited by the reviewer." in wiki.content(conn, page["page_id"])
    assert not V.list_drafts(conn)


# --- diff ------------------------------------------------------------------------------------------------

def test_diff_of_a_new_page_and_of_an_update(ws, conn):
    _planned(ws, conn, n=1)
    plan = next(iter(open_plans(conn).values()))
    text = V.diff(conn, plan["plan_id"])
    assert text.startswith("--- /dev/null") and "+Notes about Source 0." in text and "+title: Source 0" in text
    V.approve(ws, conn, V.ALL)
    # An update drafted by hand: the diff shows the old body going and the new one coming.
    page = wiki.get_by_key(conn, plan["page_key"])
    cur = conn.execute(
        "INSERT INTO page_plans (page_key, page_type, title, category, action, page_id, base_version, status,"
        " inputs_hash, inputs, draft, summary, model, created_at, updated_at)"
        " VALUES (?,?,?,?,'update',?,?,'drafted','y',?,?,?,?,?,?)",
        (plan["page_key"], plan["page_type"], plan["title"], plan["category"], page["page_id"], 1,
         json.dumps(plan["inputs"]), "Better notes.", "About it.", "test/drafter", db.utcnow(), db.utcnow()))
    text = V.diff(conn, cur.lastrowid)
    assert "-Notes about Source 0." in text and "+Better notes." in text
    V.approve(ws, conn, [cur.lastrowid])
    pd = V.page_diff(conn, page["page_id"], 1, 2)
    assert "-Notes about Source 0." in pd and "+Better notes." in pd
    assert V.page_diff(conn, page["slug"]) == pd  # default: previous vs current


# --- CLI contracts -------------------------------------------------------------------------------------------

def test_cli_drafts_json_contract(ws, conn, kompl):
    _planned(ws, conn)
    result = kompl("drafts", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    for row in rows:
        assert {"plan_id", "title", "page_type", "action", "status", "sources", "model"} <= set(row)
        assert row["action"] == "create" and row["status"] == "drafted" and row["model"] == "test/drafter"
    assert {r["title"] for r in rows} == {"Source 0", "Source 1", "Alexander Fleming"}
    assert kompl("drafts").exit_code == 0


def test_cli_approve_all_json_contract(ws, conn, kompl):
    _planned(ws, conn)
    result = kompl("approve", "--all", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"approved", "failed", "noop", "stale"} <= set(out)
    assert len(out["approved"]) == 3 and out["failed"] == []
    assert {"plan_id", "page_id", "title", "version"} <= set(out["approved"][0])
    pages = {p["title"] for p in wiki.list_pages(conn)}
    assert {"Source 0", "Source 1", "Alexander Fleming"} <= pages
    assert kompl("approve", "--all").exit_code == 0  # nothing left: says so, exit 0
    bad = kompl("approve", "4242", "--json")
    assert bad.exit_code == 1 and json.loads(bad.stdout)["failed"][0]["plan_id"] == 4242


def test_cli_reject_json_contract(ws, conn, kompl):
    _planned(ws, conn, n=1)
    plan = next(iter(open_plans(conn).values()))
    result = kompl("reject", str(plan["plan_id"]), "--reason", "too thin", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["rejected"][0]["plan_id"] == plan["plan_id"] and out["failed"] == []
    assert P.get_plan(conn, plan["plan_id"])["status"] == "rejected"


def test_cli_plan_and_diff(ws, conn, kompl):
    add_source(ws, conn, "Source [draft]", entities=[FLOREY])
    result = kompl("plan", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["plans"] == 1
    assert json.loads(kompl("plan", "--json").stdout)["plans"] == 0
    draft_all(conn)
    plan_id = next(iter(open_plans(conn).values()))["plan_id"]
    shown = kompl("diff", str(plan_id))
    assert shown.exit_code == 0 and "Notes about Source [draft]." in shown.stdout
    as_json = json.loads(kompl("diff", str(plan_id), "--json").stdout)
    assert as_json["kind"] == "plan" and "+Notes about Source [draft]." in as_json["diff"]
    kompl("approve", str(plan_id))
    page = wiki.list_pages(conn)[0]
    page_json = json.loads(kompl("diff", page["slug"], "--from", "0", "--to", "1", "--json").stdout)
    assert page_json["kind"] == "page" and "+Notes about Source [draft]." in page_json["diff"]
    assert kompl("diff", "no-such-page").exit_code == 2
