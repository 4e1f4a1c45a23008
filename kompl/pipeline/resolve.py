"""Entity resolution: turn extracted names into entities, across runs.

Each distinct (normalised name, kind) in `entity_mentions` becomes an alias of
exactly one entity. A run looks only at names that have no alias yet, so a
re-run with no new mentions changes nothing and calls no model. New names are
compared with every known name (from this run and earlier ones) through a
cascade, cheapest first:

1. exact / alias: the same match key (case, punctuation, "the", honorifics,
   company suffixes and "State of" removed) as a known name;
2. acronym ("FBI" = "Federal Bureau of Investigation", "SBF" = "Sam
   Bankman-Fried") and surname ("Bankman-Fried" = "Sam Bankman-Fried"), only
   when exactly one entity fits; several fits go to the review list;
3. fuzzy (rapidfuzz token_sort_ratio on the key and on the key without spaces),
   with candidates blocked by shared tokens, never across incompatible types and
   never between names that differ only in a number or version (GPT-3/GPT-4);
4. embedding similarity of "name: context" to settle the middle of the fuzzy band;
5. the model decides what is still ambiguous (`disambiguate` prompt, batched).

Merges are closed transitively with union-find; a merge that would join a name
with an entity it was split from (or the model said is different) is refused.
Merges below `PENDING_BELOW` confidence are recorded as pending instead. The
results are written in one transaction with one `resolve` audit row.

The pure rules (match keys, types, acronyms, surnames, version siblings, the
cheap layers of `match_pair`, union-find) live in `kompl.pipeline.matching`;
this module reads the corpus, runs the cascade, asks the model and writes.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from kompl import db
from kompl.errors import KomplError, NotFoundError
from kompl.pipeline.matching import (  # noqa: F401 - re-exported: the rules are part of this module's API
    _ANY_TYPES,
    _STOP,
    FUZZY_CANDIDATE,
    FUZZY_MERGE,
    Match,
    Name,
    UnionFind,
    _fuzzy_prefilter,
    base_form,
    fuzzy_score,
    initials,
    looks_like_acronym,
    match_pair,
    person_parts,
    types_compatible,
    version_siblings,
)
from kompl.text import norm_name

# --- thresholds --------------------------------------------------------------------------
PENDING_BELOW = 0.80  # a merge less sure than this waits for review instead
# (the fuzzy thresholds, FUZZY_MERGE and FUZZY_CANDIDATE, are with the rules in matching.py)
EMBED_MERGE = 0.90  # combined (fuzzy + cosine) / 2 that merges without the model
EMBED_BAND = 0.60  # combined score from which the model is asked
MODEL_SAME = 0.70  # a model "same" at least this sure merges; below, it goes pending
MODEL_BATCH = 20  # pairs per disambiguation call
MAX_POSTING = 400  # tokens shared by more names than this are too common to block on
CONTEXT_CHARS = 300

LAYERS = ("exact", "alias", "fuzzy", "acronym", "surname", "embedding", "model", "manual")


class PairDecision(BaseModel):
    same: bool
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


class DisambiguationResult(BaseModel):
    """The `disambiguate` contract: one decision per pair, in the order the pairs were given."""

    decisions: list[PairDecision]
    model: str = ""  # which model decided (the offline model fills it in)


# --- reading the corpus ------------------------------------------------------------------

def load_names(conn: sqlite3.Connection) -> dict[tuple[str, str], Name]:
    """Every distinct (norm, kind) in entity_mentions, aggregated over sources."""
    agg: dict[tuple[str, str], dict] = {}
    rows = conn.execute(
        "SELECT source_id, name, norm, type, kind, count, context FROM entity_mentions ORDER BY source_id, id"
    ).fetchall()
    for r in rows:
        a = agg.setdefault((r["norm"], r["kind"]), {"surfaces": Counter(), "types": Counter(), "count": 0,
                                                    "contexts": [], "sources": set()})
        n = max(1, int(r["count"] or 1))
        a["surfaces"][r["name"]] += n
        a["types"][(r["type"] or "OTHER").upper()] += n
        a["count"] += n
        a["sources"].add(r["source_id"])
        if r["context"]:
            a["contexts"].append((n, r["context"]))
    names = {}
    for (norm, kind), a in agg.items():
        types = a["types"]
        specific = [(c, t) for t, c in types.items() if t not in _ANY_TYPES]
        type_ = max(specific)[1] if specific else types.most_common(1)[0][0]
        contexts = sorted(a["contexts"], key=lambda x: -x[0])
        context = " … ".join(c for _, c in contexts[:2])[:CONTEXT_CHARS]
        surface = max(a["surfaces"].items(), key=lambda x: (x[1], len(x[0]), x[0]))[0]
        names[(norm, kind)] = Name(norm=norm, kind=kind, surface=surface, type=type_, count=a["count"],
                                   context=context, sources=len(a["sources"]), surfaces=dict(a["surfaces"]))
    return names


def _alias_rows(conn: sqlite3.Connection, status: str) -> list[sqlite3.Row]:
    return conn.execute(
        "SELECT a.*, e.type AS entity_type FROM aliases a JOIN entities e USING (entity_id) WHERE a.status = ?",
        (status,),
    ).fetchall()


# --- the run -----------------------------------------------------------------------------

@dataclass
class ResolveReport:
    new_names: int = 0
    entities_created: int = 0
    entities_merged: int = 0
    merged: dict[str, int] = field(default_factory=dict)  # by layer
    pending: int = 0
    rejected: int = 0
    model_calls: int = 0
    model_pairs: int = 0
    model_errors: list[str] = field(default_factory=list)
    changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class _Edge:
    a: tuple
    b: tuple
    match: Match


def resolve(ws: Any, conn: sqlite3.Connection, *, gateway: Any = None, embedder: Any = None,
            use_model: bool = True) -> ResolveReport:
    """Resolve every name that has no alias yet. See the module docstring for the cascade.

    `gateway`: anything with `run_many(tasks)` (default: `kompl.llm.Gateway(ws, conn)`,
    created only when a pair needs the model). `use_model=False` sends the
    ambiguous band to the review list instead.
    """
    report = ResolveReport()
    names = load_names(conn)
    merged_rows = _alias_rows(conn, "merged")
    known: dict[tuple, str] = {(r["norm"], r["kind"]): r["entity_id"] for r in merged_rows}
    for r in merged_rows:  # aliases whose mentions are gone still take part in matching
        if (r["norm"], r["kind"]) not in names:
            names[(r["norm"], r["kind"])] = Name(norm=r["norm"], kind=r["kind"], surface=r["alias"],
                                                 type=r["entity_type"], count=0)
    new_ids = sorted(nid for nid in names if nid not in known)
    retry = [r for r in conn.execute("SELECT * FROM aliases WHERE status='pending' AND needs_model=1")]
    if not new_ids and not retry:
        return report
    report.new_names = len(new_ids)

    uf = UnionFind()
    for nid in names:
        uf.add(nid)
    by_entity: dict[str, list] = defaultdict(list)
    for nid, eid in known.items():
        by_entity[eid].append(nid)
    for members in by_entity.values():
        for other in members[1:]:
            uf.union(members[0], other)
    comp_entities = lambda root: {known[m] for m in uf.members[root] if m in known}  # noqa: E731
    # Cannot-link: a name rejected for an entity never joins a component holding that entity.
    rejected: dict[tuple, set[str]] = defaultdict(set)
    for r in conn.execute("SELECT norm, kind, entity_id FROM aliases WHERE status='rejected'"):
        rejected[(r["norm"], r["kind"])].add(_live_id(conn, r["entity_id"]))
    blocked_pairs: set[frozenset] = set()

    def can_join(x: tuple, y: tuple) -> bool:
        rx, ry = uf.find(x), uf.find(y)
        ex, ey = comp_entities(rx), comp_entities(ry)
        if any(rejected.get(m, set()) & ey for m in uf.members[rx]):
            return False
        if any(rejected.get(m, set()) & ex for m in uf.members[ry]):
            return False
        return not any(frozenset((p, q)) in blocked_pairs for p in uf.members[rx] for q in uf.members[ry]) \
            if blocked_pairs else True

    tree: list[_Edge] = []
    pending: list[_Edge] = []
    rejections: list[_Edge] = []

    def join(edge: _Edge) -> None:
        if uf.find(edge.a) == uf.find(edge.b):
            return
        if edge.match.confidence < PENDING_BELOW or not can_join(edge.a, edge.b):
            pending.append(edge)
            return
        uf.union(edge.a, edge.b)
        tree.append(edge)

    # Candidate generation by blocking: match key, acronym letters, surname, shared tokens.
    by_key: dict[str, list] = defaultdict(list)
    by_initials: dict[str, list] = defaultdict(list)
    by_acronym: dict[str, list] = defaultdict(list)
    by_surname: dict[str, list] = defaultdict(list)
    by_single: dict[str, list] = defaultdict(list)
    by_token: dict[str, list] = defaultdict(list)
    for nid, n in names.items():
        by_key[n.key].append(nid)
        for ini in initials(n):
            by_initials[ini].append(nid)
        if looks_like_acronym(n):
            by_acronym[n.key].append(nid)
        parts = person_parts(n)
        if len(parts) >= 2 and n.type == "PERSON":
            by_surname[parts[-1]].append(nid)
        elif len(parts) == 1:
            by_single[parts[0]].append(nid)
        for tok in set(n.tokens):
            if tok not in _STOP and len(tok) >= 2:
                by_token[tok].append(nid)
        if len(n.squashed) >= 4:  # "draftkings" / "draft kings" share no token, but a prefix
            by_token["^" + n.squashed[:4]].append(nid)

    exact_edges, unique_edges, fuzzy_edges, band = [], [], [], []
    seen_pairs: set[frozenset] = set()
    new_set = set(new_ids)
    for nid in new_ids:
        n = names[nid]
        cands: set = set(by_key[n.key])
        if looks_like_acronym(n):
            cands.update(by_initials.get(n.key, ()))
        for ini in initials(n):
            cands.update(by_acronym.get(ini, ()))
        parts = person_parts(n)
        if len(parts) == 1:
            cands.update(by_surname.get(parts[0], ()))
        elif n.type == "PERSON":
            cands.update(by_single.get(parts[-1], ()))
        shared: set = set()
        for tok in set(n.tokens) | {"^" + n.squashed[:4]}:
            posting = by_token.get(tok, ())
            if len(posting) <= MAX_POSTING:
                shared.update(posting)
        cands.update(_fuzzy_prefilter(n, [names[c] for c in sorted(shared - cands)]))
        for cid in cands:
            pair = frozenset((nid, cid))
            if cid == nid or pair in seen_pairs:
                continue
            seen_pairs.add(pair)
            # Order: a new name first, so the edge explains how the new name got its entity.
            a, b = (nid, cid) if cid not in new_set or nid < cid else (cid, nid)
            m = match_pair(names[a], names[b])
            if m is None:
                continue
            edge = _Edge(a, b, m)
            if m.layer == "exact":
                exact_edges.append(edge)
            elif m.layer in ("acronym", "surname"):
                unique_edges.append(edge)
            elif m.band:
                band.append(edge)
            else:
                fuzzy_edges.append(edge)

    for edge in exact_edges:
        if edge.b not in new_set or edge.a not in new_set:
            edge.match = Match("alias", 1.0, edge.match.reason.replace("same name", "same name as a known alias"))
        join(edge)
    for edge in sorted(fuzzy_edges, key=lambda e: -e.match.score):
        join(edge)
    # Acronym and surname matches only count when they point at exactly one entity.
    by_short: dict[tuple, list[_Edge]] = defaultdict(list)
    for edge in unique_edges:
        short = edge.a if len(person_parts(names[edge.a])) == 1 else edge.b
        by_short[(short, edge.match.layer)].append(edge)
    for (short, layer), edges in sorted(by_short.items()):
        targets = {uf.find(e.b if e.a == short else e.a) for e in edges}
        if len(targets) == 1:
            for edge in edges:
                join(edge)
        else:
            for edge in edges:
                full = edge.b if edge.a == short else edge.a
                pending.append(_Edge(short, full, Match(layer, 0.5, edge.match.reason + f", but {len(targets)} entities fit")))

    # Embedding layer: the fuzzy band, scored with the similarity of "name: context".
    band = [e for e in band if uf.find(e.a) != uf.find(e.b)]
    ask: list[_Edge] = []
    if band:
        from kompl.embed import get_embedder

        emb = embedder or get_embedder(getattr(ws, "settings", None))
        ids = sorted({x for e in band for x in (e.a, e.b)})
        texts = [f"{names[i].surface}: {names[i].context}" for i in ids]
        vecs = dict(zip(ids, emb.embed(texts)))
        for edge in band:
            cos = float(vecs[edge.a] @ vecs[edge.b])
            combined = (edge.match.score / 100 + max(cos, 0.0)) / 2
            reason = f"fuzzy {edge.match.score:.0f}, context similarity {cos:.2f}"
            if combined >= EMBED_MERGE:
                join(_Edge(edge.a, edge.b, Match("embedding", round(combined, 3), reason)))
            elif combined >= EMBED_BAND:
                ask.append(_Edge(edge.a, edge.b, Match("embedding", round(combined, 3), reason, band=True)))

    # Model layer: what is still ambiguous, in batches; earlier deferred pairs are retried.
    for r in retry:
        target = _live_id(conn, r["entity_id"])
        row = conn.execute("SELECT norm, kind FROM entities WHERE entity_id=?", (target,)).fetchone()
        other = (row["norm"], row["kind"]) if row else None
        other = next((m for m in by_entity.get(target, []) if m in names), other)
        if other in names and (r["norm"], r["kind"]) in names:
            ask.append(_Edge((r["norm"], r["kind"]), other, Match(r["layer"], r["confidence"], r["reason"], band=True)))
    ask = [e for e in ask if uf.find(e.a) != uf.find(e.b)]
    if ask and not use_model:
        pending.extend(ask)
    elif ask:
        decided = _ask_model(ws, conn, gateway, ask, names, report)
        for edge, decision in zip(ask, decided):
            if decision is None:
                edge.match.reason += " (model not asked yet)"
                edge.match.band = True
                pending.append(edge)
            elif decision.same:
                m = Match("model", round(decision.confidence, 3), f"model: {decision.reason}".strip())
                if decision.confidence >= MODEL_SAME:
                    join(_Edge(edge.a, edge.b, m))
                else:
                    pending.append(_Edge(edge.a, edge.b, m))
            else:
                blocked_pairs.add(frozenset((edge.a, edge.b)))
                rejections.append(_Edge(edge.a, edge.b, Match("model", round(decision.confidence, 3),
                                                                 f"model: different ({decision.reason})")))

    _write(conn, names, known, new_ids, uf, tree, pending, rejections, report)
    return report


def _ask_model(ws, conn, gateway, edges: list[_Edge], names: dict, report: ResolveReport) -> list:
    """One decision (or None when the model could not answer) per edge, in order."""
    from kompl.llm import LLMError, Task

    if gateway is None:
        try:
            from kompl.llm import Gateway
        except ImportError as exc:
            report.model_errors.append(f"the model gateway is not available: {exc}")
            return [None] * len(edges)
        gateway = Gateway(ws, conn)

    def side(nid: tuple) -> dict:
        n = names[nid]
        return {"name": n.surface, "type": n.type, "context": n.context}

    batches = [edges[i:i + MODEL_BATCH] for i in range(0, len(edges), MODEL_BATCH)]
    tasks = [Task(purpose="disambiguate", prompt="disambiguate",
                  variables={"pairs": [{"a": side(e.a), "b": side(e.b)} for e in batch]},
                  schema=DisambiguationResult, meta={"pairs": len(batch)}) for batch in batches]
    try:
        results = gateway.run_many(tasks)
    except KomplError as exc:  # e.g. a missing key: recorded, the pairs wait for the next run
        report.model_errors.append(str(exc))
        return [None] * len(edges)
    report.model_calls += len(tasks)
    report.model_pairs += len(edges)
    out: list = []
    for batch, result in zip(batches, results):
        if isinstance(result, (LLMError, Exception)):
            report.model_errors.append(str(result))
            out.extend([None] * len(batch))
            continue
        decisions = list(result.decisions)
        if len(decisions) != len(batch):
            report.model_errors.append(
                f"the model returned {len(decisions)} decisions for {len(batch)} pairs; the rest wait for review")
        out.extend(decisions[:len(batch)] + [None] * (len(batch) - len(decisions)))
    return out


# --- writing -----------------------------------------------------------------------------

def _write(conn, names, known, new_ids, uf, tree, pending, rejections, report) -> None:
    now = db.utcnow()
    touched: set[str] = set()
    with db.transaction(conn) as tx:
        clash = [nid for nid in new_ids if tx.execute(
            "SELECT 1 FROM aliases WHERE norm=? AND kind=? AND status='merged'", nid).fetchone()]
        if clash:
            raise KomplError("Another `kompl resolve` changed the entities while this one ran",
                             hint="run `kompl resolve` again")
        # How each new name joined its component: walk the union tree from the known names.
        adj: dict[tuple, list] = defaultdict(list)
        for e in tree:
            adj[e.a].append((e.b, e.match))
            adj[e.b].append((e.a, e.match))
        comps: dict[Any, list] = defaultdict(list)
        for nid in names:
            comps[uf.find(nid)].append(nid)
        entity_of: dict[tuple, str] = {}
        for root, members in comps.items():
            if all(m in known for m in members) and len({known[m] for m in members}) == 1:
                for m in members:
                    entity_of[m] = known[m]
                continue
            existing = sorted({_live_id(tx, known[m]) for m in members if m in known},
                              key=lambda eid: _created(tx, eid))
            if existing:
                survivor = existing[0]
                for other in existing[1:]:
                    _absorb(tx, other, survivor, now)
                    report.entities_merged += 1
                starts = [m for m in members if m in known]
            else:
                founder = max(members, key=lambda m: (_fullness(names[m])[:2], names[m].count, _fullness(names[m]), m))
                survivor = _new_entity(tx, names[founder], now)
                report.entities_created += 1
                starts = [founder]
            touched.add(survivor)
            via: dict[tuple, Match] = {s: Match("exact", 1.0, "first seen") for s in starts}
            queue = list(starts)
            while queue:
                cur = queue.pop()
                for nxt, m in adj.get(cur, ()):
                    if nxt not in via:
                        shown = repr(names[cur].surface) in m.reason
                        via[nxt] = Match(m.layer, m.confidence,
                                         m.reason if shown else f"{m.reason} (via {names[cur].surface!r})")
                        queue.append(nxt)
            for m in members:
                entity_of[m] = survivor
                if m in known:
                    continue
                how = via.get(m, Match("exact", 1.0, "first seen"))
                _upsert_alias(tx, names[m], survivor, how, "merged", now)
                if how.reason != "first seen":
                    report.merged[how.layer] = report.merged.get(how.layer, 0) + 1
        for edge in pending:
            a, b = edge.a, edge.b
            if entity_of.get(a) == entity_of.get(b):
                continue
            if a in known and b not in known:
                a, b = b, a
            _upsert_alias(tx, names[a], entity_of[b], edge.match, "pending", now,
                          needs_model=edge.match.band and edge.match.layer != "model")
            report.pending += 1
        for edge in rejections:
            if entity_of.get(edge.a) != entity_of.get(edge.b):
                _upsert_alias(tx, names[edge.a], entity_of[edge.b], edge.match, "rejected", now)
                report.rejected += 1
        _drop_settled_pending(tx, now)
        for eid in touched:
            _refresh_entity(tx, eid, names, now)
        report.changed = bool(new_ids or report.pending or report.rejected or report.entities_merged
                              or report.merged)
        db.log_activity(tx, "resolve", details=report.to_dict(), actor="kompl")


def _fullness(n: Name) -> tuple:
    """How much a name looks like a full form: not an acronym, more words."""
    return (not looks_like_acronym(n), len(person_parts(n)) >= 2, len(n.tokens))


def _created(conn, eid: str) -> tuple:
    row = conn.execute("SELECT created_at FROM entities WHERE entity_id=?", (eid,)).fetchone()
    return (row["created_at"] if row else "", eid)


def _live_id(conn, eid: str) -> str:
    """Follow merged_into to the entity that absorbed `eid`."""
    seen = set()
    while eid not in seen:
        seen.add(eid)
        row = conn.execute("SELECT merged_into FROM entities WHERE entity_id=?", (eid,)).fetchone()
        if not row or not row["merged_into"]:
            return eid
        eid = row["merged_into"]
    return eid


def _new_entity(conn, name: Name, now: str) -> str:
    digest = hashlib.sha256(f"{name.kind}\0{name.norm}".encode()).hexdigest()
    eid, n = f"ent-{digest[:12]}", 0
    while conn.execute("SELECT 1 FROM entities WHERE entity_id=?", (eid,)).fetchone():
        n += 1
        eid = f"ent-{digest[:12]}-{n}"
    conn.execute(
        "INSERT INTO entities (entity_id, canonical_name, norm, type, kind, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,?)", (eid, name.surface, name.norm, name.type, name.kind, now, now))
    return eid


def _upsert_alias(conn, name: Name, eid: str, how: Match, status: str, now: str, needs_model: bool = False) -> None:
    conn.execute(
        "INSERT INTO aliases (norm, kind, entity_id, alias, layer, confidence, reason, status, needs_model,"
        " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (norm, kind, entity_id) DO UPDATE SET alias=excluded.alias, layer=excluded.layer,"
        " confidence=excluded.confidence, reason=excluded.reason, status=excluded.status,"
        " needs_model=excluded.needs_model, updated_at=excluded.updated_at",
        (name.norm, name.kind, eid, name.surface, how.layer, float(how.confidence), how.reason, status,
         int(needs_model), now, now),
    )


def _absorb(conn, src: str, dst: str, now: str, layer: str | None = None, reason: str | None = None) -> None:
    """Move every alias of entity `src` to `dst` and mark `src` as merged into it."""
    for r in conn.execute("SELECT * FROM aliases WHERE entity_id=?", (src,)).fetchall():
        clash = conn.execute("SELECT id, status FROM aliases WHERE norm=? AND kind=? AND entity_id=?",
                             (r["norm"], r["kind"], dst)).fetchone()
        if clash:  # a pending/rejected row for the destination is superseded by the merged one
            conn.execute("DELETE FROM aliases WHERE id=?", (clash["id"] if r["status"] == "merged" else r["id"],))
            if r["status"] != "merged":
                continue
        conn.execute(
            "UPDATE aliases SET entity_id=?, layer=COALESCE(?, layer), confidence=CASE WHEN ? IS NULL"
            " THEN confidence ELSE 1.0 END, reason=COALESCE(?, reason), updated_at=? WHERE id=?",
            (dst, layer, layer, reason, now, r["id"]))
    conn.execute("UPDATE entities SET merged_into=?, updated_at=? WHERE entity_id=?", (dst, now, src))
    conn.execute("UPDATE entities SET merged_into=? WHERE merged_into=?", (dst, src))


def _drop_settled_pending(conn, now: str) -> None:
    """Pending rows whose name is already merged into that same entity are settled."""
    conn.execute(
        "DELETE FROM aliases WHERE status='pending' AND EXISTS (SELECT 1 FROM aliases m WHERE m.norm=aliases.norm"
        " AND m.kind=aliases.kind AND m.status='merged' AND m.entity_id=aliases.entity_id)")


def _refresh_entity(conn, eid: str, names: dict | None, now: str) -> None:
    """Recompute canonical name and type: the most frequent full form (then the longest)."""
    rows = conn.execute("SELECT norm, kind, alias FROM aliases WHERE entity_id=? AND status='merged'", (eid,)).fetchall()
    if not rows:
        return
    names = names if names is not None else load_names(conn)
    members = [names.get((r["norm"], r["kind"])) or Name(norm=r["norm"], kind=r["kind"], surface=r["alias"], count=0)
               for r in rows]
    # Full forms: not acronyms, not clippings ("Fed" of "Federal Reserve"), not a bare surname.
    tokens = {t for n in members for t in n.tokens}
    full = [n for n in members if not looks_like_acronym(n)
            and not (len(n.tokens) == 1 and any(t != n.key and t.startswith(n.key) for t in tokens))]
    if any(n.type == "PERSON" for n in members):
        full = [n for n in full if len(person_parts(n)) >= 2] or full
    best = max(full or members, key=lambda n: (n.count, len(n.surface), n.surface))
    types = Counter()
    for n in members:
        types[n.type] += max(n.count, 1)
    specific = [(c, t) for t, c in types.items() if t not in _ANY_TYPES]
    type_ = max(specific)[1] if specific else types.most_common(1)[0][0]
    conn.execute("UPDATE entities SET canonical_name=?, norm=?, type=?, updated_at=? WHERE entity_id=?",
                 (best.surface, best.norm, type_, now, eid))


# --- reading entities (for the planner and the CLI) -------------------------------------------

def _entity_dict(row: sqlite3.Row) -> dict:
    return {k: row[k] for k in row.keys()}


def canonical_for(conn: sqlite3.Connection, name_or_norm: str, kind: str | None = None) -> dict | None:
    """The live entity a name (surface form, norm or entity id) resolves to, or None."""
    text = (name_or_norm or "").strip()
    if text.startswith("ent-"):
        row = conn.execute("SELECT entity_id FROM entities WHERE entity_id=?", (text,)).fetchone()
        if row:
            return _get_entity(conn, _live_id(conn, row["entity_id"]))
    norm = norm_name(text)
    sql = "SELECT entity_id FROM aliases WHERE norm=? AND status='merged'"
    args: list = [norm]
    if kind:
        sql += " AND kind=?"
        args.append(kind)
    row = conn.execute(sql + " ORDER BY kind = 'entity' DESC LIMIT 1", args).fetchone()
    if row is None:
        row = conn.execute("SELECT entity_id FROM entities WHERE norm=? AND merged_into IS NULL"
                           + (" AND kind=?" if kind else "") + " LIMIT 1", args).fetchone()
    return _get_entity(conn, _live_id(conn, row["entity_id"])) if row else None


def _get_entity(conn, eid: str) -> dict | None:
    row = conn.execute("SELECT * FROM entities WHERE entity_id=?", (eid,)).fetchone()
    return _entity_dict(row) if row else None


def entity_sources(conn: sqlite3.Connection, entity_id: str, active_only: bool = True) -> list[str]:
    """Sources that mention any merged alias of the entity (active sources only by default)."""
    eid = _live_id(conn, entity_id)
    sql = ("SELECT DISTINCT m.source_id FROM aliases a JOIN entity_mentions m ON m.norm = a.norm AND m.kind = a.kind"
           " JOIN sources s ON s.source_id = m.source_id WHERE a.entity_id = ? AND a.status = 'merged'")
    if active_only:
        sql += " AND s.status = 'active'"
    return [r[0] for r in conn.execute(sql + " ORDER BY m.source_id", (eid,))]


def list_entities(conn: sqlite3.Connection, active_only: bool = True) -> list[dict]:
    """Every live entity with its merged aliases and its (active) source ids."""
    out = []
    for row in conn.execute("SELECT * FROM entities WHERE merged_into IS NULL ORDER BY canonical_name, entity_id"):
        e = _entity_dict(row)
        e["aliases"] = [r["alias"] for r in conn.execute(
            "SELECT alias FROM aliases WHERE entity_id=? AND status='merged' ORDER BY alias", (e["entity_id"],))]
        e["sources"] = entity_sources(conn, e["entity_id"], active_only)
        out.append(e)
    return out


def list_aliases(conn: sqlite3.Connection, status: str | None = None) -> list[dict]:
    """Alias rows with their entity's canonical name (the review list with status='pending')."""
    sql = ("SELECT a.alias, a.norm, a.kind, a.entity_id, e.canonical_name, e.type, a.layer, a.confidence, a.reason,"
           " a.status, a.needs_model, a.updated_at FROM aliases a JOIN entities e USING (entity_id)")
    args: list = []
    if status:
        sql += " WHERE a.status=?"
        args.append(status)
    return [dict(r) for r in conn.execute(sql + " ORDER BY e.canonical_name, a.alias", args)]


# --- manual merge and split ------------------------------------------------------------------

def _require(conn, name: str) -> dict:
    entity = canonical_for(conn, name)
    if entity is None:
        raise NotFoundError(f"No entity or alias named {name!r}",
                            hint="run `kompl resolve` first, and see `kompl aliases` for known names")
    return entity


def merge(conn: sqlite3.Connection, a: str, b: str) -> dict:
    """Merge the entity of name `a` into the entity of name `b` (manual, confidence 1)."""
    src, dst = _require(conn, a), _require(conn, b)
    if src["entity_id"] == dst["entity_id"]:
        return {"merged": False, "entity": dst, "reason": f"{a!r} and {b!r} are already one entity"}
    now = db.utcnow()
    with db.transaction(conn, "alias_merge", target=dst["entity_id"],
                        details={"from": src["entity_id"], "from_name": src["canonical_name"],
                                 "into": dst["entity_id"], "into_name": dst["canonical_name"]}) as tx:
        # Rejections between the two no longer hold: the user said they are the same.
        tx.execute("DELETE FROM aliases WHERE status='rejected' AND ((entity_id=? AND (norm, kind) IN"
                   " (SELECT norm, kind FROM aliases WHERE entity_id=? AND status='merged')) OR (entity_id=? AND"
                   " (norm, kind) IN (SELECT norm, kind FROM aliases WHERE entity_id=? AND status='merged')))",
                   (dst["entity_id"], src["entity_id"], src["entity_id"], dst["entity_id"]))
        _absorb(tx, src["entity_id"], dst["entity_id"], now, layer="manual",
                reason=f"merged by hand into {dst['canonical_name']!r}")
        _drop_settled_pending(tx, now)
        _refresh_entity(tx, dst["entity_id"], None, now)
    return {"merged": True, "entity": _get_entity(conn, dst["entity_id"]), "from": src["entity_id"]}


def split(conn: sqlite3.Connection, name: str) -> dict:
    """Detach alias `name` from its entity into an entity of its own; it never merges back."""
    norm = norm_name(name)
    row = conn.execute("SELECT * FROM aliases WHERE norm=? AND status='merged' ORDER BY kind='entity' DESC LIMIT 1",
                       (norm,)).fetchone()
    if row is None:
        raise NotFoundError(f"No alias named {name!r}", hint="see `kompl aliases` for known names")
    old = row["entity_id"]
    others = conn.execute("SELECT COUNT(*) FROM aliases WHERE entity_id=? AND status='merged' AND id != ?",
                          (old, row["id"])).fetchone()[0]
    pend = conn.execute("SELECT COUNT(*) FROM aliases WHERE norm=? AND kind=? AND status='pending'",
                        (norm, row["kind"])).fetchone()[0]
    if not others and not pend:
        raise KomplError(f"{row['alias']!r} is not merged with anything", hint="nothing to split")
    now = db.utcnow()
    names = load_names(conn)
    me = names.get((norm, row["kind"])) or Name(norm=norm, kind=row["kind"], surface=row["alias"], count=0)
    with db.transaction(conn, "alias_split", target=old, details={"alias": row["alias"], "from": old}) as tx:
        tx.execute("UPDATE aliases SET status='rejected', reason=?, updated_at=? WHERE norm=? AND kind=?"
                   " AND status='pending'", (f"rejected by hand (split of {row['alias']!r})", now, norm, row["kind"]))
        new_id = old
        if others:
            tx.execute("UPDATE aliases SET status='rejected', layer='manual', confidence=1.0, reason=?,"
                       " updated_at=? WHERE id=?", (f"split by hand from {old}", now, row["id"]))
            new_id = _new_entity(tx, me, now)
            _upsert_alias(tx, me, new_id, Match("manual", 1.0, f"split by hand from {old}"), "merged", now)
            _refresh_entity(tx, old, names, now)
            _refresh_entity(tx, new_id, names, now)
    return {"alias": row["alias"], "from": old, "entity": _get_entity(conn, new_id)}


__all__ = ["DisambiguationResult", "Name", "PairDecision", "ResolveReport", "canonical_for", "entity_sources",
           "list_aliases", "list_entities", "match_pair", "merge", "resolve", "split", "types_compatible",
           "version_siblings"]
