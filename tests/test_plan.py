"""The planner: which pages are wanted, create vs update, idempotence, tombstones, supersession, stale plans."""

from __future__ import annotations

import hashlib
import json

from kompl import db
from kompl.ingest import store as sources
from kompl.pipeline import plan as P
from kompl.pipeline import resolve as R
from kompl.pipeline.extract import (
    Claim,
    Entity,
    ExtractionResult,
    Relationship,
    store_extraction,
)
from kompl.wiki import store as wiki

LONG = " ".join(f"w{i}" for i in range(400))


# --- helpers (test_review.py uses them too) ---------------------------------------------------------

def add_source(ws, conn, title: str, *, text: str | None = None, entities=(), concepts=(), claims=(),
               relationships=(), status: str = "active") -> str:
    """Ingest a source (raw file and row), store its extraction and resolve the names."""
    body = text if text is not None else f"# {title}\n\n{LONG}\n\n" + " ".join(n for n, _ in entities)
    body += f"\n\n<!-- {title} {len(body)} {sorted(entities)} -->"  # distinct text per source
    digest = hashlib.sha256(body.encode()).hexdigest()
    new = sources.NewSource(title=title, title_from="given", source_type="text", input_kind="stdin", input="-",
                            markdown=body, content_hash=digest, original=body.encode(), original_sha256=digest,
                            original_ext=".md")
    with sources.ingest_lock(ws):
        row, _ = sources.store(ws, conn, new)
    result = ExtractionResult(
        entities=[Entity(name=n, type=t, mentions=2) for n, t in entities],
        concepts=[{"name": c, "description": f"{c} is a concept"} for c in concepts],
        claims=[Claim(claim=c, quote=c, entities_involved=[n for n, _ in entities][:1]) for c in claims],
        relationships=[Relationship(**{"from": a, "to": b, "type": t}) for a, b, t in relationships],
    )
    store_extraction(conn, row, body, model="test/extract", chunks=1, local={}, result=result)
    R.resolve(ws, conn, use_model=False)
    if status != "active":
        conn.execute("UPDATE sources SET status=? WHERE source_id=?", (status, row["source_id"]))
    return row["source_id"]


def entity_id(conn, name: str) -> str:
    return R.canonical_for(conn, name)["entity_id"]


def open_plans(conn) -> dict[str, dict]:
    return P.open_plans(conn)


def draft_all(conn, body=lambda p: f"Notes about {p['title']}.", model: str = "test/drafter") -> list[int]:
    """Stand in for the drafter: every planned plan gets a draft."""
    ids = []
    for plan in P.open_plans(conn).values():
        if plan["status"] == "planned":
            conn.execute("UPDATE page_plans SET draft=?, summary=?, model=?, status='drafted' WHERE plan_id=?",
                         (body(plan), f"About {plan['title']}.", model, plan["plan_id"]))
            ids.append(plan["plan_id"])
    return ids


FLEMING, FLOREY, CHAIN = ("Alexander Fleming", "PERSON"), ("Howard Florey", "PERSON"), ("Ernst Chain", "PERSON")


# --- source pages ---------------------------------------------------------------------------------

def test_every_source_gets_a_source_page_and_short_ones_are_original_sources(ws, conn):
    a = add_source(ws, conn, "Mould on a plate")
    b = add_source(ws, conn, "A note", text="Penicillin kills bacteria. A short note.")
    report = P.plan_pending(ws, conn)
    plans = open_plans(conn)
    assert plans[f"source:{a}"]["page_type"] == "source"
    assert plans[f"source:{b}"]["page_type"] == "original-source"
    for sid in (a, b):
        plan = plans[f"source:{sid}"]
        assert plan["action"] == "create" and plan["status"] == "planned"
        assert plan["inputs"]["sources"] == plan["inputs"]["new_sources"] == [sid]
        assert plan["inputs"]["schema_sha256"] == P.schema_sha256(ws) != ""
    assert len(report.created) == 2
    assert db.activity(conn, action="plan")


def test_two_sources_with_the_same_title_get_two_pages(ws, conn):
    a = add_source(ws, conn, "Penicillin", text=f"First. {LONG}")
    b = add_source(ws, conn, "Penicillin", text=f"Second. {LONG}")
    P.plan_pending(ws, conn)
    plans = open_plans(conn)
    assert {f"source:{a}", f"source:{b}"} <= set(plans)
    assert plans[f"source:{a}"]["title"] == plans[f"source:{b}"]["title"] == "Penicillin"


def test_unextracted_and_archived_sources_get_no_page(ws, conn):
    archived = add_source(ws, conn, "Old", status="archived")
    P.plan_pending(ws, conn)
    assert f"source:{archived}" not in open_plans(conn)


# --- entity pages -------------------------------------------------------------------------------------

def test_entity_is_promoted_at_the_threshold_with_aliases_and_junk_types_skipped(ws, conn):
    s1 = add_source(ws, conn, "One", entities=[FLEMING, FLOREY, ("1928", "DATE")], concepts=["antibiotic"])
    s2 = add_source(ws, conn, "Two", entities=[FLEMING, ("1928", "DATE")], concepts=["antibiotic"])
    P.plan_pending(ws, conn)
    plans = open_plans(conn)
    fleming = plans[f"entity:{entity_id(conn, 'Alexander Fleming')}"]
    assert fleming["page_type"] == "entity" and fleming["title"] == "Alexander Fleming"
    assert fleming["category"] == "person"
    assert fleming["inputs"]["sources"] == sorted([s1, s2])
    assert fleming["inputs"]["entity_id"] == entity_id(conn, "Alexander Fleming")
    concept = plans[f"concept:{entity_id(conn, 'antibiotic')}"]
    assert concept["page_type"] == "concept" and concept["category"] == "concept"
    assert f"entity:{entity_id(conn, 'Howard Florey')}" not in plans  # one source only
    assert not any(p["title"] == "1928" for p in plans.values())  # a DATE is not a page


def test_a_higher_threshold_promotes_nothing(ws, conn):
    add_source(ws, conn, "One", entities=[FLEMING])
    add_source(ws, conn, "Two", entities=[FLEMING])
    ws.settings.entity_promotion_threshold = 3
    P.plan_pending(ws, conn)
    assert not any(k.startswith("entity:") for k in open_plans(conn))


def test_archived_sources_never_count_towards_promotion(ws, conn):
    add_source(ws, conn, "One", entities=[FLOREY])
    add_source(ws, conn, "Two", entities=[FLOREY], status="archived")
    P.plan_pending(ws, conn)
    assert not any(k.startswith("entity:") for k in open_plans(conn))


def test_a_create_plan_no_longer_warranted_is_superseded(ws, conn):
    add_source(ws, conn, "One", entities=[FLOREY])
    s2 = add_source(ws, conn, "Two", entities=[FLOREY])
    P.plan_pending(ws, conn)
    key = f"entity:{entity_id(conn, 'Howard Florey')}"
    plan_id = open_plans(conn)[key]["plan_id"]
    conn.execute("UPDATE sources SET status='archived' WHERE source_id=?", (s2,))
    report = P.plan_pending(ws, conn)
    assert key not in open_plans(conn)
    assert P.get_plan(conn, plan_id)["status"] == "superseded"
    assert any(s["plan_id"] == plan_id for s in report.superseded)


def test_a_saved_answer_draft_survives_planning(ws, conn):
    """Answers saved from chat are asked for by a person: the planner never closes them."""
    add_source(ws, conn, "One", entities=[FLOREY])
    now = "2026-01-01T00:00:00Z"
    conn.execute(
        "INSERT INTO page_plans (page_key, page_type, title, action, status, inputs_hash, inputs, draft,"
        " created_at, updated_at) VALUES ('answer:abc', 'answer', 'Who led Oxford?', 'create', 'drafted',"
        " 'h', '{}', 'Howard Florey.', ?, ?)", (now, now))
    P.plan_pending(ws, conn)
    assert open_plans(conn)["answer:abc"]["status"] == "drafted"


# --- idempotence, supersession, tombstones -----------------------------------------------------------------

def test_replanning_unchanged_state_creates_nothing_and_calls_no_model(ws, conn):
    add_source(ws, conn, "One", entities=[FLEMING, FLOREY, CHAIN])
    add_source(ws, conn, "Two", entities=[FLEMING, FLOREY, CHAIN])
    first = P.plan_pending(ws, conn)
    assert first.created
    calls = conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]
    plans_before = conn.execute("SELECT COUNT(*) FROM page_plans").fetchone()[0]
    audits = len(db.activity(conn, action="plan"))
    again = P.plan_pending(ws, conn)
    assert not again.created and not again.superseded and again.unchanged == len(first.created)
    assert conn.execute("SELECT COUNT(*) FROM page_plans").fetchone()[0] == plans_before
    assert conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == calls
    assert len(db.activity(conn, action="plan")) == audits  # nothing changed: no audit row


def test_a_newer_plan_supersedes_the_open_one(ws, conn):
    add_source(ws, conn, "One", entities=[FLEMING])
    add_source(ws, conn, "Two", entities=[FLEMING])
    P.plan_pending(ws, conn)
    key = f"entity:{entity_id(conn, 'Alexander Fleming')}"
    old = open_plans(conn)[key]
    s3 = add_source(ws, conn, "Three", entities=[FLEMING])
    P.plan_pending(ws, conn)
    new = open_plans(conn)[key]
    assert new["plan_id"] != old["plan_id"] and s3 in new["inputs"]["sources"]
    assert P.get_plan(conn, old["plan_id"])["status"] == "superseded"
    assert conn.execute("SELECT COUNT(*) FROM page_plans WHERE page_key=? AND status IN ('planned','drafted','failed')",
                        (key,)).fetchone()[0] == 1


def test_a_rejected_plan_does_not_come_back_until_its_inputs_change(ws, conn):
    from kompl.review import reject

    add_source(ws, conn, "One", entities=[FLEMING])
    add_source(ws, conn, "Two", entities=[FLEMING])
    P.plan_pending(ws, conn)
    key = f"entity:{entity_id(conn, 'Alexander Fleming')}"
    reject(conn, [open_plans(conn)[key]["plan_id"]], "not needed")
    again = P.plan_pending(ws, conn)
    assert key not in open_plans(conn) and again.tombstoned == 1 and not again.created
    add_source(ws, conn, "Three", entities=[FLEMING])
    P.plan_pending(ws, conn)
    back = open_plans(conn)[key]
    assert back["action"] == "create" and len(back["inputs"]["sources"]) == 3


# --- updates -------------------------------------------------------------------------------------------

def test_an_update_plan_carries_only_the_new_sources(ws, conn):
    from kompl.review import ALL, approve

    s1 = add_source(ws, conn, "One", entities=[FLEMING])
    s2 = add_source(ws, conn, "Two", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn)
    assert not approve(ws, conn, ALL).failed
    key = f"entity:{entity_id(conn, 'Alexander Fleming')}"
    page = wiki.get_by_key(conn, key)
    s3 = add_source(ws, conn, "Three", entities=[FLEMING])
    report = P.plan_pending(ws, conn)
    update = open_plans(conn)[key]
    assert update["action"] == "update" and update["page_id"] == page["page_id"]
    assert update["base_version"] == page["version"]
    assert update["inputs"]["new_sources"] == [s3]
    assert update["inputs"]["sources"] == sorted([s1, s2, s3])
    assert {c["page_key"] for c in report.created} == {key, f"source:{s3}"}  # committed source pages untouched


def test_a_stale_plan_is_superseded_and_replanned_from_the_new_version(ws, conn):
    from kompl.review import ALL, approve

    add_source(ws, conn, "One", entities=[FLEMING])
    add_source(ws, conn, "Two", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn)
    approve(ws, conn, ALL)
    key = f"entity:{entity_id(conn, 'Alexander Fleming')}"
    add_source(ws, conn, "Three", entities=[FLEMING])
    P.plan_pending(ws, conn)
    old = open_plans(conn)[key]
    page = wiki.get_by_key(conn, key)
    wiki.commit_version(ws, conn, wiki.PageWrite(key, "entity", page["title"], "Edited by a person.",
                                                 [(s, "cited") for s in wiki.page_source_ids(conn, page["page_id"])],
                                                 author="human"))
    report = P.plan_pending(ws, conn)
    new = open_plans(conn)[key]
    assert P.get_plan(conn, old["plan_id"])["status"] == "superseded"
    assert "stale" in P.get_plan(conn, old["plan_id"])["decided_reason"]
    assert new["base_version"] == page["version"] + 1
    assert any(s["reason"] == "stale" for s in report.superseded)


def test_plan_for_given_sources_only(ws, conn):
    s1 = add_source(ws, conn, "One")
    s2 = add_source(ws, conn, "Two")
    P.plan_pending(ws, conn, source_ids=[s1])
    assert set(open_plans(conn)) == {f"source:{s1}"}
    P.plan_pending(ws, conn)
    assert f"source:{s2}" in open_plans(conn)


# --- comparisons and overviews ----------------------------------------------------------------------------

def _conflict(conn, a: str, b: str, eid: str | None, topic: str, verdict: str = "contradicts") -> int:
    ca = conn.execute("SELECT id FROM claims WHERE source_id=? LIMIT 1", (a,)).fetchone()[0]
    cb = conn.execute("SELECT id FROM claims WHERE source_id=? LIMIT 1", (b,)).fetchone()[0]
    cur = conn.execute(
        "INSERT INTO conflicts (claim_a, claim_b, source_a, source_b, entity_id, topic, verdict, confidence, model,"
        " pair_hash, judged_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (ca, cb, a, b, eid, topic, verdict, 0.9, "test", f"{ca}-{cb}-{verdict}", db.utcnow()))
    return cur.lastrowid


def test_contradicting_sources_get_a_comparison_page(ws, conn):
    s1 = add_source(ws, conn, "One", entities=[FLEMING], claims=["Fleming discovered penicillin in 1928."])
    s2 = add_source(ws, conn, "Two", entities=[FLEMING], claims=["Fleming discovered penicillin in 1929."])
    eid = entity_id(conn, "Alexander Fleming")
    cid = _conflict(conn, s1, s2, eid, "Alexander Fleming")
    _conflict(conn, s2, s1, eid, "Alexander Fleming", verdict="compatible")
    P.plan_pending(ws, conn)
    comp = open_plans(conn)[f"comparison:{eid}"]
    assert comp["page_type"] == "comparison" and comp["title"] == "Alexander Fleming: conflicting accounts"
    assert comp["inputs"]["conflict_ids"] == [cid] and comp["inputs"]["sources"] == sorted([s1, s2])


def test_a_conflict_with_an_archived_source_makes_no_comparison(ws, conn):
    s1 = add_source(ws, conn, "One", entities=[FLEMING], claims=["Claim one."])
    s2 = add_source(ws, conn, "Two", entities=[FLEMING], claims=["Claim two."])
    _conflict(conn, s1, s2, None, "the year")
    conn.execute("UPDATE sources SET status='archived' WHERE source_id=?", (s2,))
    P.plan_pending(ws, conn)
    assert not any(k.startswith("comparison:") for k in open_plans(conn))


def test_competing_entities_seen_in_enough_sources_get_a_comparison(ws, conn):
    rel = [("Pfizer", "Merck", "competes_with")]
    ents = [("Pfizer", "ORG"), ("Merck", "ORG")]
    add_source(ws, conn, "One", entities=ents, relationships=rel)
    add_source(ws, conn, "Two", entities=ents, relationships=rel)
    P.plan_pending(ws, conn)
    comps = [p for k, p in open_plans(conn).items() if k.startswith("comparison:")]
    assert len(comps) == 1 and "Merck" in comps[0]["title"] and "Pfizer" in comps[0]["title"]


def test_a_category_with_three_entity_pages_gets_an_overview(ws, conn):
    add_source(ws, conn, "One", entities=[FLEMING, FLOREY, CHAIN])
    add_source(ws, conn, "Two", entities=[FLEMING, FLOREY, CHAIN])
    P.plan_pending(ws, conn)
    overview = open_plans(conn)["overview:person"]
    assert overview["title"] == "People overview" and overview["page_type"] == "overview"
    assert len(overview["inputs"]["members"]) == 3


# --- removing a source ----------------------------------------------------------------------------------

def test_replan_without_plans_updates_that_remove_the_source(ws, conn):
    from kompl.review import ALL, approve

    s1 = add_source(ws, conn, "One", entities=[FLEMING])
    s2 = add_source(ws, conn, "Two", entities=[FLEMING])
    s3 = add_source(ws, conn, "Three", entities=[FLEMING])
    P.plan_pending(ws, conn)
    draft_all(conn)
    approve(ws, conn, ALL)
    key = f"entity:{entity_id(conn, 'Alexander Fleming')}"
    report = P.replan_without(ws, conn, s3)
    plan = open_plans(conn)[key]
    assert plan["action"] == "update" and plan["inputs"]["removed_sources"] == [s3]
    assert plan["inputs"]["sources"] == sorted([s1, s2]) and plan["inputs"]["new_sources"] == []
    assert f"source:{s3}" in report.orphaned
    # The ordinary planner keeps the removal plan (nothing new), and again after the source is gone.
    conn.execute("UPDATE sources SET status='archived' WHERE source_id=?", (s3,))
    assert not P.plan_pending(ws, conn).created
    assert open_plans(conn)[key]["plan_id"] == plan["plan_id"]
    assert not P.replan_without(ws, conn, s3).created  # idempotent
    assert json.loads(conn.execute("SELECT inputs FROM page_plans WHERE plan_id=?",
                                   (plan["plan_id"],)).fetchone()[0])["removed_sources"] == [s3]
