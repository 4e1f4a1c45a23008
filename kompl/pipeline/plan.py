"""The page plan: decide, deterministically, which pages to create or update.

No model call decides which pages exist. From the active, extracted sources,
the resolved entities and the judged conflicts the planner derives the set of
wanted pages (see docs/compile.md for identities):

- a source page per source (`original-source` for very short ones);
- an entity / concept page once the entity is mentioned in at least
  `entity_promotion_threshold` ACTIVE sources (junk types such as dates and
  amounts never get pages);
- a comparison page per entity (or topic) with contradicting claims from at
  least two active sources, and per entity pair whose competes_with /
  contradicts relationship is seen in at least the threshold of sources;
- an overview page per category with at least `OVERVIEW_MIN_MEMBERS` entity pages.

A wanted page that does not exist gets a `create` plan; an existing page gets
an `update` plan only when something new contributes to it (a source, a
conflict or an overview member it lacks), and that plan's `new_sources` lists
only what the page lacks, so drafting an update costs the same however many
sources the page already has. Plans are keyed by `inputs_hash`: the same
inputs never produce a second plan, a rejected (tombstoned) pair is never
proposed again, and a newer plan supersedes the open one for the same page.
Every run is one transaction with one `plan` audit row when it changed anything.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kompl import db
from kompl.workspace import Workspace

__all__ = [
    "CATEGORY_BY_TYPE", "ORIGINAL_SOURCE_MAX_WORDS", "OVERVIEW_MIN_MEMBERS", "PLAN_VERSION", "PlanReport",
    "add_tombstone", "category_for", "get_plan", "inputs_hash", "is_tombstoned", "plan_pending", "replan_without",
    "supersede",
]

PLAN_VERSION = "1"
ORIGINAL_SOURCE_MAX_WORDS = 120  # shorter sources become their own page, without a model call
OVERVIEW_MIN_MEMBERS = 3
# Entity types that never get a page of their own: dates, amounts and numbers are facts, not topics.
JUNK_TYPES = frozenset({"DATE", "TIME", "MONEY", "PERCENT", "QUANTITY", "CARDINAL", "ORDINAL"})
COMPARISON_RELATIONS = frozenset({"competes_with", "contradicts"})
OPEN_STATUSES = ("planned", "drafted", "failed")
CATEGORY_BY_TYPE = {
    "PERSON": "person", "ORG": "organisation", "GPE": "place", "LOC": "place", "FAC": "place", "NORP": "group",
    "PRODUCT": "product", "EVENT": "event", "WORK": "work", "LAW": "work", "CONCEPT": "concept",
}
CATEGORY_TITLES = {
    "person": "People", "organisation": "Organisations", "place": "Places", "group": "Groups",
    "product": "Products", "event": "Events", "work": "Works", "concept": "Concepts",
}
# An overview of "other" would gather whatever the extractor could not type: not a useful page.
NO_OVERVIEW = frozenset({"other"})


def category_for(entity_type: str) -> str:
    return CATEGORY_BY_TYPE.get((entity_type or "").upper(), "other")


@dataclass
class PlanReport:
    created: list[dict] = field(default_factory=list)  # {plan_id, page_key, page_type, title, action}
    superseded: list[dict] = field(default_factory=list)  # {plan_id, page_key, reason}
    unchanged: int = 0  # wanted plans that already exist (open, or committed)
    tombstoned: int = 0  # wanted plans a rejection rules out
    orphaned: list[str] = field(default_factory=list)  # replan_without: pages left with no source

    @property
    def changed(self) -> bool:
        return bool(self.created or self.superseded)

    def to_dict(self) -> dict:
        return {"plans": len(self.created), "created": self.created, "superseded": self.superseded,
                "unchanged": self.unchanged, "tombstoned": self.tombstoned, "orphaned": self.orphaned}


@dataclass
class _Want:
    """A page the planner wants to exist, and what supports it."""

    page_key: str
    page_type: str
    title: str
    category: str
    sources: set[str]
    extra: dict[str, Any] = field(default_factory=dict)  # entity_id, aliases, conflict_ids, members, ...
    touches: set[str] = field(default_factory=set)  # sources that make it relevant to a --source run


# --- hashing and tombstones ------------------------------------------------------------------

def schema_sha256(ws: Workspace) -> str:
    try:
        return hashlib.sha256(ws.schema_path.read_bytes()).hexdigest()
    except OSError:
        return ""


def inputs_hash(page_key: str, page_type: str, title: str, inputs: dict, source_hashes: dict[str, str]) -> str:
    """sha256 of the canonical JSON of everything a draft depends on (docs/compile.md)."""
    payload = {
        "page_key": page_key, "page_type": page_type, "title": title,
        "sources": [[s, source_hashes.get(s, "")] for s in sorted(inputs.get("sources", []))],
        "removed_sources": sorted(inputs.get("removed_sources", [])),
        "conflict_ids": sorted(inputs.get("conflict_ids", [])),
        "members": sorted(inputs.get("members", [])),
        "schema_sha256": inputs.get("schema_sha256", ""),
        "plan_version": PLAN_VERSION,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def is_tombstoned(conn: sqlite3.Connection, page_key: str, digest: str) -> bool:
    return conn.execute("SELECT 1 FROM tombstones WHERE page_key=? AND inputs_hash=?", (page_key, digest)).fetchone() is not None


def add_tombstone(conn: sqlite3.Connection, page_key: str, digest: str, reason: str, plan_id: int | None) -> None:
    """Never propose (page_key, inputs_hash) again. Call inside the caller's transaction."""
    conn.execute("INSERT OR REPLACE INTO tombstones (page_key, inputs_hash, reason, plan_id, created_at)"
                 " VALUES (?,?,?,?,?)", (page_key, digest, reason, plan_id, db.utcnow()))


# --- reading plans -----------------------------------------------------------------------------

def _plan(row: sqlite3.Row | None) -> dict | None:
    if row is None:
        return None
    out = dict(row)
    out["inputs"] = json.loads(out["inputs"] or "{}")
    out["left_out"] = json.loads(out["left_out"] or "[]")
    return out


def get_plan(conn: sqlite3.Connection, plan_id: int) -> dict | None:
    return _plan(conn.execute("SELECT * FROM page_plans WHERE plan_id=?", (plan_id,)).fetchone())


def open_plans(conn: sqlite3.Connection) -> dict[str, dict]:
    rows = conn.execute(f"SELECT * FROM page_plans WHERE status IN {OPEN_STATUSES} ORDER BY plan_id")
    return {p["page_key"]: p for p in map(_plan, rows)}


def _committed_inputs(conn: sqlite3.Connection) -> dict[str, dict]:
    """page_key -> (inputs, inputs_hash) of the latest plan that reached the page."""
    out: dict[str, dict] = {}
    for row in conn.execute("SELECT page_key, inputs, inputs_hash FROM page_plans"
                            " WHERE status IN ('approved', 'noop') ORDER BY plan_id"):
        out[row["page_key"]] = {"inputs": json.loads(row["inputs"] or "{}"), "hash": row["inputs_hash"]}
    return out


def supersede(conn: sqlite3.Connection, plan_id: int, reason: str) -> None:
    """Close an open plan (call inside the caller's transaction)."""
    now = db.utcnow()
    conn.execute("UPDATE page_plans SET status='superseded', decided_reason=?, decided_at=?, updated_at=?"
                 f" WHERE plan_id=? AND status IN {OPEN_STATUSES}", (reason, now, now, plan_id))


# --- what pages are wanted -------------------------------------------------------------------------

def _word_count(ws: Workspace, source: dict) -> int:
    from kompl.ingest import store as sources

    # No realistic text averages 40 characters a word: long sources need not be read.
    if source["chars"] > ORIGINAL_SOURCE_MAX_WORDS * 40:
        return ORIGINAL_SOURCE_MAX_WORDS * 40
    try:
        return len(sources.read_markdown(ws, source["source_id"]).split())
    except OSError:
        return max(1, source["chars"] // 6)


def _wanted(conn: sqlite3.Connection, threshold: int, active: dict[str, dict], pages: dict[str, dict]) -> list[_Want]:
    from kompl.pipeline import resolve

    wants: list[_Want] = []
    for sid, source in active.items():
        wants.append(_Want(f"source:{sid}", "source", source["title"], "source", {sid}, {}, {sid}))

    # Pages keyed by an entity that was later merged away keep serving the entity that absorbed it.
    old_keys: dict[str, str] = {}
    for key in pages:
        kind, _, eid = key.partition(":")
        if kind in ("entity", "concept") and eid:
            live = resolve.canonical_for(conn, eid)
            if live and live["entity_id"] != eid:
                old_keys.setdefault(f"{kind}:{live['entity_id']}", key)

    names: dict[str, str] = {}
    for e in resolve.list_entities(conn, active_only=True):
        names[e["entity_id"]] = e["canonical_name"]
        srcs = {s for s in e["sources"] if s in active}
        if len(srcs) < max(1, threshold) or (e["type"] or "").upper() in JUNK_TYPES:
            continue
        kind = "concept" if e["kind"] == "concept" else "entity"
        key = f"{kind}:{e['entity_id']}"
        key = key if key in pages else old_keys.get(key, key)
        aliases = sorted({a for a in e["aliases"] if a.casefold() != e["canonical_name"].casefold()})
        category = "concept" if kind == "concept" else category_for(e["type"])
        wants.append(_Want(key, kind, e["canonical_name"], category, srcs,
                           {"entity_id": e["entity_id"], "aliases": aliases}, set(srcs)))

    wants.extend(_conflict_comparisons(conn, active, names))
    wants.extend(_relation_comparisons(conn, active, threshold))
    wants.extend(_overviews(wants, pages))
    return wants


def _conflict_comparisons(conn: sqlite3.Connection, active: dict[str, dict], names: dict[str, str]) -> list[_Want]:
    from kompl.pipeline import resolve
    from kompl.text import norm_name

    groups: dict[str, dict] = {}
    rows = conn.execute("SELECT id, source_a, source_b, entity_id, topic FROM conflicts"
                        " WHERE verdict = 'contradicts' ORDER BY id").fetchall()
    for row in rows:
        if row["source_a"] not in active or row["source_b"] not in active:
            continue
        topic, eid = row["topic"] or "", None
        if row["entity_id"]:
            live = resolve.canonical_for(conn, row["entity_id"])
            if live:
                eid, topic = live["entity_id"], live["canonical_name"]
        key = eid or norm_name(topic)
        if not key:
            continue
        g = groups.setdefault(key, {"entity_id": eid, "topic": topic, "ids": set(), "sources": set()})
        g["ids"].add(row["id"])
        g["sources"].update((row["source_a"], row["source_b"]))
    out = []
    for key, g in sorted(groups.items()):
        if len(g["sources"]) < 2:
            continue
        extra: dict[str, Any] = {"conflict_ids": sorted(g["ids"])}
        if g["entity_id"]:
            extra["entity_id"] = g["entity_id"]
        out.append(_Want(f"comparison:{key}", "comparison", f"{g['topic']}: conflicting accounts", "comparison",
                         set(g["sources"]), extra, set(g["sources"])))
    return out


def _relation_comparisons(conn: sqlite3.Connection, active: dict[str, dict], threshold: int) -> list[_Want]:
    from kompl.pipeline import resolve

    seen: dict[tuple[str, str], dict] = {}
    types = tuple(sorted(COMPARISON_RELATIONS))
    rows = conn.execute(f"SELECT source_id, from_name, to_name, type FROM relationship_mentions WHERE type IN {types}"
                        " ORDER BY id").fetchall()
    cache: dict[str, dict | None] = {}
    for row in rows:
        if row["source_id"] not in active:
            continue
        ends = []
        for name in (row["from_name"], row["to_name"]):
            if name not in cache:
                cache[name] = resolve.canonical_for(conn, name)
            ends.append(cache[name])
        if not all(ends) or ends[0]["entity_id"] == ends[1]["entity_id"]:
            continue
        a, b = sorted(ends, key=lambda e: e["entity_id"])
        pair = seen.setdefault((a["entity_id"], b["entity_id"]), {"names": (a["canonical_name"], b["canonical_name"]),
                                                                  "sources": set(), "types": set()})
        pair["sources"].add(row["source_id"])
        pair["types"].add(row["type"])
    out = []
    for (ea, eb), pair in sorted(seen.items()):
        if len(pair["sources"]) < max(2, threshold):
            continue
        topic = f"{pair['names'][0]} vs {pair['names'][1]}"
        out.append(_Want(f"comparison:{ea}--{eb}", "comparison", f"{topic}: conflicting accounts", "comparison",
                         set(pair["sources"]), {"entity_ids": [ea, eb], "relationships": sorted(pair["types"])},
                         set(pair["sources"])))
    return out


def _overviews(wants: list[_Want], pages: dict[str, dict]) -> list[_Want]:
    members: dict[str, set[str]] = defaultdict(set)
    touches: dict[str, set[str]] = defaultdict(set)
    for key, page in pages.items():
        if page["page_type"] in ("entity", "concept"):
            members[page["category"]].add(key)
    for w in wants:
        if w.page_type in ("entity", "concept"):
            members[w.category].add(w.page_key)
            touches[w.category] |= w.sources
    out = []
    for category, keys in sorted(members.items()):
        if len(keys) < OVERVIEW_MIN_MEMBERS or category in NO_OVERVIEW:
            continue
        title = f"{CATEGORY_TITLES.get(category, category.capitalize())} overview"
        out.append(_Want(f"overview:{category}", "overview", title, category, set(), {"members": sorted(keys)},
                         touches[category]))
    return out


# --- the planner ---------------------------------------------------------------------------------

def plan_pending(ws: Workspace, conn: sqlite3.Connection, *, source_ids: list[str] | None = None,
                 page_keys: list[str] | None = None) -> PlanReport:
    """Create the plans that the current state calls for; re-planning unchanged state creates nothing.

    `source_ids` limits planning to pages those sources contribute to; `page_keys`
    to those pages (used to re-plan a stale draft).
    """
    from kompl.ingest import store as sources
    from kompl.pipeline.extract import extraction_state
    from kompl.wiki import store as wiki

    report = PlanReport()
    schema = schema_sha256(ws)
    with db.transaction(conn):
        extracted = extraction_state(conn)
        everything = {s["source_id"]: s for s in sources.list_sources(conn)}
        hashes = {sid: s["content_hash"] for sid, s in everything.items()}
        active = {sid: s for sid, s in everything.items() if s["status"] == "active" and sid in extracted}
        pages = {p["page_key"]: p for p in wiki.list_pages(conn, include_hidden=True)}
        opened = open_plans(conn)
        committed = _committed_inputs(conn)

        # Stale drafts: the page changed since the plan was made. Close them; they are re-planned below.
        carried = {key: set(plan["inputs"].get("removed_sources", [])) for key, plan in opened.items()}
        for key, plan in list(opened.items()):
            page = pages.get(key)
            base = page["version"] if page else None
            if (plan["action"] == "update" and plan["base_version"] != base) or (plan["action"] == "create" and page):
                supersede(conn, plan["plan_id"], f"stale: the page is at version {base}, the plan started from "
                                                 f"{plan['base_version']}")
                report.superseded.append({"plan_id": plan["plan_id"], "page_key": key, "reason": "stale"})
                del opened[key]

        wants = _wanted(conn, ws.settings.entity_promotion_threshold, active, pages)
        wanted_keys = {w.page_key for w in wants}
        if source_ids is not None:
            only = set(source_ids)
            wants = [w for w in wants if w.touches & only]
        if page_keys is not None:
            wants = [w for w in wants if w.page_key in set(page_keys)]
        for want in wants:
            _plan_one(ws, conn, want, pages.get(want.page_key), opened.get(want.page_key),
                      committed.get(want.page_key), carried.get(want.page_key, set()), active, hashes, schema, report)

        # A create plan nothing asks for any more (its sources were archived, its entity merged away).
        # Saved chat answers are asked for by a person, not by the sources: they stay.
        if source_ids is None and page_keys is None:
            for key, plan in opened.items():
                if plan["action"] == "create" and key not in wanted_keys and plan["page_type"] != "answer":
                    supersede(conn, plan["plan_id"], "no longer warranted by the active sources")
                    report.superseded.append({"plan_id": plan["plan_id"], "page_key": key, "reason": "unwarranted"})
        if report.changed:
            db.log_activity(conn, "plan", details={"created": [c["plan_id"] for c in report.created],
                                                   "superseded": [s["plan_id"] for s in report.superseded]})
    return report


def _plan_one(ws, conn, want: _Want, page: dict | None, open_plan: dict | None, done: dict | None,
              carried: set[str], active: dict, hashes: dict, schema: str, report: PlanReport) -> None:
    """Plan one wanted page. `carried`: removed_sources of the open (or stale) plan this one replaces."""
    extra: dict[str, Any] = {}
    removed: set[str] = set()
    if page is None:
        action, new, sources_after = "create", set(want.sources), set(want.sources)
        if want.page_type == "source":
            if open_plan and open_plan["action"] == "create":
                want.page_type = open_plan["page_type"]  # decided from the text already; no need to read it again
            elif _word_count(ws, active[next(iter(want.sources))]) < ORIGINAL_SOURCE_MAX_WORDS:
                want.page_type = "original-source"
    else:
        action = "update"
        if want.page_type == "source":
            want.page_type = page["page_type"]
        have = set(page["sources"])
        new = want.sources - have
        # A removal still pending (its plan replaced or gone stale) is kept until a draft without it is committed.
        removed = {s for s in carried if s in have and s not in active}
        before = (done or {}).get("inputs", {})
        new_conflicts = sorted(set(want.extra.get("conflict_ids", [])) - set(before.get("conflict_ids", [])))
        new_members = sorted(set(want.extra.get("members", [])) - set(before.get("members", [])))
        if not (new or new_conflicts or new_members or removed):
            report.unchanged += 1
            return
        if new_conflicts:
            extra["new_conflict_ids"] = new_conflicts
        if new_members:
            extra["new_members"] = new_members
        sources_after = want.sources | {s for s in have if s in active}
    inputs = {**want.extra, **extra, "sources": sorted(sources_after - removed), "new_sources": sorted(new - removed),
              "removed_sources": sorted(removed), "schema_sha256": schema}
    _write_plan(conn, want.page_key, want.page_type, want.title, want.category, action, page, inputs,
                open_plan, done, hashes, report)


def _write_plan(conn, key: str, page_type: str, title: str, category: str, action: str, page: dict | None,
                inputs: dict, open_plan: dict | None, done: dict | None, hashes: dict, report: PlanReport) -> None:
    digest = inputs_hash(key, page_type, title, inputs, hashes)
    if (open_plan and open_plan["inputs_hash"] == digest) or (page is not None and done and done["hash"] == digest):
        report.unchanged += 1
        return
    if is_tombstoned(conn, key, digest):
        report.tombstoned += 1
        return
    if open_plan:
        supersede(conn, open_plan["plan_id"], "replaced by a newer plan")
        report.superseded.append({"plan_id": open_plan["plan_id"], "page_key": key, "reason": "replaced"})
    now = db.utcnow()
    cur = conn.execute(
        "INSERT INTO page_plans (page_key, page_type, title, category, action, page_id, base_version, status,"
        " inputs_hash, inputs, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (key, page_type, title, category, action, page["page_id"] if page else None,
         page["version"] if page else None, "planned", digest, json.dumps(inputs, ensure_ascii=False, sort_keys=True),
         now, now))
    report.created.append({"plan_id": cur.lastrowid, "page_key": key, "page_type": page_type, "title": title,
                           "action": action})


def replan_without(ws: Workspace, conn: sqlite3.Connection, source_id: str) -> PlanReport:
    """Plan updates of the pages that cite `source_id`, with it in `removed_sources`.

    For a source being deleted or archived: the drafts rewrite each page without
    what only that source said. The source's own page, and pages it alone
    supports, are not planned (listed in `orphaned`: deleting them is the caller's job).
    """
    from kompl.ingest import store as sources
    from kompl.wiki import store as wiki

    report = PlanReport()
    schema = schema_sha256(ws)
    with db.transaction(conn):
        everything = {s["source_id"]: s for s in sources.list_sources(conn)}
        hashes = {sid: s["content_hash"] for sid, s in everything.items()}
        opened = open_plans(conn)
        committed = _committed_inputs(conn)
        for page in wiki.list_pages(conn, include_hidden=True):
            if source_id not in page["sources"]:
                continue
            rest = [s for s in page["sources"] if s != source_id and everything.get(s, {}).get("status") == "active"]
            if page["page_key"] == f"source:{source_id}" or not rest:
                report.orphaned.append(page["page_key"])
                continue
            open_plan = opened.get(page["page_key"])
            stale = open_plan and (open_plan["action"] != "update" or open_plan["base_version"] != page["version"])
            before = open_plan["inputs"] if open_plan and not stale else {}
            removed = set(before.get("removed_sources", [])) | {source_id}
            new = set(before.get("new_sources", [])) - removed
            kept = {k: v for k, v in before.items() if k not in ("sources", "new_sources", "removed_sources")}
            if not before:
                prior = (committed.get(page["page_key"]) or {}).get("inputs", {})
                kept = {k: prior[k] for k in ("entity_id", "conflict_ids", "members", "entity_ids") if k in prior}
                if page["page_type"] in ("entity", "concept", "comparison") and "entity_id" not in kept:
                    key = page["page_key"].partition(":")[2]
                    if key.startswith("ent-") and "--" not in key:
                        kept["entity_id"] = key
                kept["aliases"] = page["aliases"]
            inputs = {**kept, "sources": sorted((set(rest) | new) - removed), "new_sources": sorted(new),
                      "removed_sources": sorted(removed), "schema_sha256": schema}
            _write_plan(conn, page["page_key"], page["page_type"], page["title"], page["category"], "update", page,
                        inputs, open_plan, None, hashes, report)
        if report.changed:
            db.log_activity(conn, "plan", target=source_id,
                            details={"without": source_id, "created": [c["plan_id"] for c in report.created],
                                     "superseded": [s["plan_id"] for s in report.superseded]})
    return report
