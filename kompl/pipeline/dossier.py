"""What one plan's prompt is made of: the existing page, the dossier and the source passages (read-only)."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from kompl.pipeline.citations import remove_cited, split_sentences, strip_links
from kompl.text import norm_name
from kompl.wiki.markdown import split_frontmatter
from kompl.workspace import Workspace

PASSAGE_CHARS = 1_500  # a longer paragraph is cut down to its sentences that mention the subject
NEW_PAGE = "(none: this is a new page)"


class _Sources:
    """Source rows and markdown, read once per run."""

    def __init__(self, ws: Workspace, conn: sqlite3.Connection):
        self.ws, self.conn = ws, conn
        self._rows: dict[str, dict | None] = {}
        self._texts: dict[str, str] = {}

    def row(self, source_id: str) -> dict | None:
        if source_id not in self._rows:
            from kompl.ingest import store

            self._rows[source_id] = store.get(self.conn, source_id)
        return self._rows[source_id]

    def title(self, source_id: str) -> str:
        row = self.row(source_id)
        return row["title"] if row else source_id

    def text(self, source_id: str) -> str:
        if source_id not in self._texts:
            from kompl.ingest import store

            self._texts[source_id] = split_frontmatter(store.read_markdown(self.ws, source_id))[1].strip()
        return self._texts[source_id]


@dataclass
class _Job:
    """One plan on its way to a draft."""

    plan: dict
    allowed: list[str]
    new: list[str]
    removed: set[str]
    existing: str | None  # the current page body (links stripped), None for a new page
    variables: dict
    passages: list[dict]
    left_out: list[dict] = field(default_factory=list)
    error: str | None = None
    rounds: int = 0
    summarize_calls: int = 0
    summarize_ids: list[int] = field(default_factory=list)
    groups: list[list[dict]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.plan["page_key"]


def _existing_body(conn: sqlite3.Connection, plan: dict) -> str | None:
    from kompl.errors import NotFoundError
    from kompl.wiki import store as pages

    page = None
    if plan.get("page_id"):
        page = conn.execute("SELECT page_id FROM pages WHERE page_id = ?", (plan["page_id"],)).fetchone()
    if page is None:
        page = conn.execute("SELECT page_id FROM pages WHERE page_key = ? AND status = 'active'",
                            (plan["page_key"],)).fetchone()
    if page is None:
        return None
    try:
        text = pages.content(conn, page[0], plan.get("base_version"))
    except NotFoundError:
        text = pages.content(conn, page[0])
    return strip_links(split_frontmatter(text)[1]).strip() + "\n"


def _entity(conn: sqlite3.Connection, plan: dict) -> dict | None:
    from kompl.pipeline import resolve

    inputs = plan["inputs"]
    ref = inputs.get("entity_id") or plan["page_key"].split(":", 1)[-1]
    entity = resolve.canonical_for(conn, ref) if ref else None
    if entity is None and plan["page_type"] in ("entity", "concept"):
        entity = resolve.canonical_for(conn, plan["title"])
    if entity is None:
        return None
    ids = [r[0] for r in conn.execute("SELECT entity_id FROM entities WHERE entity_id = ? OR merged_into = ?",
                                      (entity["entity_id"], entity["entity_id"]))]
    rows = conn.execute(f"SELECT alias, norm FROM aliases WHERE status = 'merged' AND entity_id IN ({_marks(ids)})",
                        ids).fetchall()
    names = [entity["canonical_name"], *[r[0] for r in rows], *(inputs.get("aliases") or [])]
    entity["ids"] = ids
    entity["names"] = list(dict.fromkeys(n for n in names if n and n.strip()))
    entity["norms"] = sorted({norm_name(n) for n in entity["names"]} | {r[1] for r in rows})
    return entity


def _marks(items: list) -> str:
    return ",".join("?" * len(items)) or "NULL"


def _name_pattern(names: list[str]) -> re.Pattern | None:
    from kompl.wiki.markdown import link_pattern

    return link_pattern([n for n in names if len(n.strip()) >= 2])


def _mentioning_passages(text: str, pattern: re.Pattern | None, source_id: str) -> list[dict]:
    """Paragraphs of a source that mention the subject (long ones: just those sentences)."""
    if pattern is None:
        return []
    out = []
    for para in re.split(r"\n[ \t]*\n", text):
        para = para.strip()
        if not para or not pattern.search(para):
            continue
        if len(para) > PASSAGE_CHARS:
            para = " ".join(s for s in split_sentences(para) if pattern.search(s))
        out.append({"source": source_id, "text": para})
    return out


def _claims(conn: sqlite3.Connection, sources: list[str], norms: set[str] | None,
            pattern: re.Pattern | None) -> list[dict]:
    rows = conn.execute(
        f"SELECT id, source_id, claim, quote, entities FROM claims WHERE source_id IN ({_marks(sources)})"
        " ORDER BY source_id, COALESCE(quote_start, id), id", sources).fetchall()
    out = []
    for r in rows:
        involved = json.loads(r["entities"] or "[]")
        if norms is not None:
            hit = any(norm_name(e) in norms for e in involved) or bool(pattern and pattern.search(r["claim"] + " " + r["quote"]))
            if not hit:
                continue
        out.append({"id": r["id"], "source": r["source_id"], "claim": r["claim"],
                    "quote": re.sub(r"\s+", " ", r["quote"]).strip(), "entities": involved})
    return out


def _conflicts(conn: sqlite3.Connection, allowed: set[str], new: set[str], *, entity_ids: list[str],
               conflict_ids: list[int]) -> list[dict]:
    rows = conn.execute(
        "SELECT c.id, c.source_a, c.source_b, c.topic, c.reason, ca.claim AS claim_a, ca.quote AS quote_a,"
        " cb.claim AS claim_b, cb.quote AS quote_b FROM conflicts c"
        " JOIN claims ca ON ca.id = c.claim_a JOIN claims cb ON cb.id = c.claim_b"
        f" WHERE c.verdict = 'contradicts' AND (c.entity_id IN ({_marks(entity_ids)}) OR c.id IN ({_marks(conflict_ids)}))"
        " ORDER BY c.id", [*entity_ids, *conflict_ids]).fetchall()
    out = []
    for r in rows:
        if r["source_a"] not in allowed or r["source_b"] not in allowed:
            continue
        if not ({r["source_a"], r["source_b"]} & new):
            continue  # already on the page from an earlier draft
        out.append({
            "id": r["id"], "topic": r["topic"], "reason": r["reason"],
            "a": {"source": r["source_a"], "claim": r["claim_a"], "quote": re.sub(r"\s+", " ", r["quote_a"]).strip()},
            "b": {"source": r["source_b"], "claim": r["claim_b"], "quote": re.sub(r"\s+", " ", r["quote_b"]).strip()},
        })
    return out


def _source_dossier(conn: sqlite3.Connection, srcs: _Sources, sources: list[str]) -> tuple[dict, list[dict]]:
    """A source page: the source's metadata, extraction summary, claims, entities and concepts."""
    from kompl.pipeline.extract import get_extraction

    dossier: dict[str, Any] = {"sources": {}, "summary": {}, "claims": [], "entities": [], "concepts": []}
    passages = []
    for sid in sources:
        row = srcs.row(sid)
        document = ((row or {}).get("metadata") or {}).get("document") or {}
        dossier["sources"][sid] = {"title": srcs.title(sid), "type": (row or {}).get("source_type", ""),
                                   "url": (row or {}).get("url") or document.get("url", ""),
                                   "publisher": document.get("publisher", ""), "author": document.get("author", ""),
                                   "published": document.get("published", "")}
        extraction = get_extraction(conn, sid)
        if extraction:
            dossier["summary"][sid] = extraction["result"].get("summary", "")
        dossier["claims"] += _claims(conn, [sid], None, None)
        for r in conn.execute("SELECT name, type, kind, count, description FROM entity_mentions WHERE source_id = ?"
                              " ORDER BY count DESC, name", (sid,)):
            if r["kind"] == "entity":
                dossier["entities"].append({"source": sid, "name": r["name"], "type": r["type"], "count": r["count"]})
            else:
                dossier["concepts"].append({"source": sid, "name": r["name"], "description": r["description"]})
        passages.append({"source": sid, "text": srcs.text(sid)})
    return dossier, passages


def _subject_dossier(conn: sqlite3.Connection, srcs: _Sources, plan: dict, new: list[str],
                     allowed: list[str]) -> tuple[dict, list[dict]]:
    """Entity, concept and comparison pages: everything the new sources say about the subject."""
    entity = _entity(conn, plan)
    inputs = plan["inputs"]
    names = entity["names"] if entity else [re.sub(r":\s*conflicting accounts$", "", plan["title"], flags=re.I)]
    norms = set(entity["norms"]) if entity else {norm_name(n) for n in names}
    pattern = _name_pattern(names)
    kind = entity["kind"] if entity else ("concept" if plan["page_type"] == "concept" else "entity")
    dossier: dict[str, Any] = {
        "subject": {"name": entity["canonical_name"] if entity else names[0], "aliases": names[1:],
                    "type": entity["type"] if entity else "", "kind": kind},
        "sources": {sid: {"title": srcs.title(sid)} for sid in new},
        "contexts": [], "descriptions": [], "claims": [], "relationships": [], "conflicts": [],
    }
    marks = _marks(new)
    rows = conn.execute(
        f"SELECT source_id, name, context, description FROM entity_mentions WHERE source_id IN ({marks})"
        f" AND norm IN ({_marks(sorted(norms))}) ORDER BY source_id, count DESC", [*new, *sorted(norms)]).fetchall()
    for r in rows:
        if r["context"] and r["context"].strip():
            dossier["contexts"].append({"source": r["source_id"], "name": r["name"], "sentence": r["context"].strip()})
        if r["description"] and r["description"].strip():
            dossier["descriptions"].append({"source": r["source_id"], "name": r["name"],
                                            "description": r["description"].strip()})
    dossier["claims"] = _claims(conn, new, norms, pattern)
    for r in conn.execute(f"SELECT source_id, from_name, to_name, type, description FROM relationship_mentions"
                          f" WHERE source_id IN ({marks}) ORDER BY id", new):
        if norm_name(r["from_name"]) in norms or norm_name(r["to_name"]) in norms:
            dossier["relationships"].append({"source": r["source_id"], "from": r["from_name"], "to": r["to_name"],
                                             "type": r["type"], "description": r["description"]})
    conflict_ids = [int(c) for c in inputs.get("conflict_ids") or []]
    dossier["conflicts"] = _conflicts(conn, set(allowed), set(new), entity_ids=entity["ids"] if entity else [],
                                      conflict_ids=conflict_ids)
    for c in dossier["conflicts"]:
        for side in ("a", "b"):
            sid = c[side]["source"]
            dossier["sources"].setdefault(sid, {"title": srcs.title(sid)})
    passages = [p for sid in new for p in _mentioning_passages(srcs.text(sid), pattern, sid)]
    return dossier, passages


def _overview_dossier(conn: sqlite3.Connection, plan: dict, allowed: list[str], existing: str | None) -> dict:
    """Overview pages: the member pages' titles and summaries (only members not on the page yet, for updates)."""
    from kompl.wiki import store as pages

    members = []
    for key in plan["inputs"].get("members") or []:
        page = pages.get_by_key(conn, key)
        if page is not None:
            member = {"key": key, "title": page["title"], "page_type": page["page_type"], "summary": page["summary"],
                      "sources": [s for s in pages.page_source_ids(conn, page["page_id"]) if s in allowed]}
        else:
            row = conn.execute("SELECT title, page_type, summary, inputs FROM page_plans WHERE page_key = ?"
                               " AND status NOT IN ('rejected', 'superseded') ORDER BY plan_id DESC LIMIT 1",
                               (key,)).fetchone()
            if row is None:
                continue
            srcs = json.loads(row["inputs"] or "{}").get("sources") or []
            member = {"key": key, "title": row["title"], "page_type": row["page_type"], "summary": row["summary"] or "",
                      "sources": [s for s in srcs if s in allowed]}
        if existing and member["title"].casefold() in existing.casefold():
            continue
        members.append(member)
    return {"category": plan["category"], "members": members}


def build_job(ws: Workspace, conn: sqlite3.Connection, plan: dict, schema_text: str, srcs: _Sources) -> _Job:
    """Everything one plan's prompt needs (read-only; no transaction)."""
    inputs = plan["inputs"]
    removed = set(inputs.get("removed_sources") or [])
    allowed = sorted(s for s in dict.fromkeys(inputs.get("sources") or []) if s not in removed)
    default_new = allowed if plan["action"] == "create" else []
    new = [s for s in dict.fromkeys(inputs.get("new_sources", default_new) or []) if s in allowed]
    existing = _existing_body(conn, plan) if plan["action"] == "update" or plan.get("page_id") else None
    prompt_existing = existing
    left_out: list[dict] = []
    if existing is not None and removed:
        prompt_existing, dropped = remove_cited(existing, removed)
        if dropped:
            left_out.append({"what": f"{dropped} statement(s) of the existing page citing only removed sources",
                             "why": "removed_sources must not appear on the page"})
    page_type = plan["page_type"]
    if page_type in ("source", "original-source"):
        dossier, passages = _source_dossier(conn, srcs, new)
    elif page_type == "overview":
        dossier, passages = _overview_dossier(conn, plan, allowed, existing), []
    else:
        dossier, passages = _subject_dossier(conn, srcs, plan, new, allowed)
    variables = {
        "page": {"title": plan["title"], "page_type": page_type, "category": plan["category"],
                 "action": plan["action"], "page_key": plan["page_key"]},
        "allowed_sources": allowed,
        "new_sources": new,
        "action": "update: keep it and add what the new sources say" if existing is not None else "create",
        "schema": schema_text,
        "existing_page": prompt_existing if prompt_existing is not None else NEW_PAGE,
        "dossier": dossier,
        "passages": passages,
    }
    return _Job(plan=plan, allowed=allowed, new=new, removed=removed, existing=existing, variables=variables,
                passages=passages, left_out=left_out)


def read_schema(ws: Workspace) -> str:
    """The workspace's schema.md (the shipped default when the workspace has none)."""
    from kompl.workspace import default_schema_path

    for path in (ws.schema_path, default_schema_path()):
        if path and path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


__all__ = ["NEW_PAGE", "PASSAGE_CHARS", "build_job", "read_schema"]
