"""Hybrid retrieval over committed pages: FTS5 bm25 and vector chunks, fused by reciprocal rank.

Two rankings are made for a query. The full-text leg runs a MATCH over
`pages_fts` built from the user's words only (each word quoted, the words
OR-ed), so FTS syntax typed by a user can never break the query; bm25 weighs
a title hit five times a body hit. The vector leg asks `kompl.vectors.VectorIndex`
for the nearest page chunks and keeps each page's best chunk; it runs in a worker
thread while SQLite ranks the full text. Each page then gets
`sum(weight / (RRF_K + rank))` over the legs it appears in (reciprocal rank
fusion; the vector leg weighs half with the offline hashing embedder, which
matches words rather than meaning), plus two light signals: how many active
sources support it, and how recently it changed. Every component is returned in
`scores`, nothing is hidden.

Only committed, active pages with at least one active source are candidates.
`include_archived` adds pages whose sources are all archived; `include_drafts`
adds drafted page plans (the pending outbox), searched by full text and marked
`draft=True`. Rejected and superseded plans never appear.

When the vector index cannot be used (not built yet, or kompl.vectors missing),
the search runs on full text alone and says so in `notes`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kompl.workspace import Workspace

RRF_K = 60
# The offline hashing embedder matches spelling and shared words, not meaning: its leg mostly
# repeats the full-text evidence, so it counts half (on the dev eval set: recall@5 0.976 -> 0.986).
# A semantic embedder's leg counts fully.
LEXICAL_EMBEDDERS = frozenset({"hashing"})
LEXICAL_VECTOR_WEIGHT = 0.5
# The light signals are tie-breakers: at most ~0.003 together, while one rank step
# near the top of one leg is worth ~0.0003 and a second leg adds ~0.016.
SOURCE_WEIGHT = 0.002  # a page with n active sources gets SOURCE_WEIGHT * n / (n + 1)
RECENCY_WEIGHT = 0.001  # halves every RECENCY_HALF_LIFE_DAYS since the page last changed
RECENCY_HALF_LIFE_DAYS = 180.0
TITLE_WEIGHT, BODY_WEIGHT = 5.0, 1.0
POOL_MIN = 50  # candidates taken from each leg before fusion
CHUNKS_PER_PAGE = 3  # vector chunks asked for per wanted page (several chunks map to one page)
MAX_QUERY_TERMS = 32
MODES = ("hybrid", "fts", "vector")

STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "he", "she", "they", "them", "his", "her", "their", "we", "our", "you", "your", "i", "me", "my", "not", "no", "so", "than", "then", "there", "here", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "all", "any", "both", "each", "more", "most", "other", "some", "such", "only", "own", "same", "too", "very", "can", "will", "just", "should", "would", "could", "may", "might", "must", "do", "does", "did", "has", "have", "had", "about", "into", "over", "also"]
)
_TOKEN = re.compile(r"\w+", re.UNICODE)


class VectorSearcher(Protocol):
    def query(self, text: str, k: int = 10) -> list: ...  # list of VectorHit(page_id, chunk, score, text)


@dataclass
class SearchHit:
    """One result: a committed page, or a draft (`draft=True`, `plan_id` set)."""

    page_id: int | None
    title: str
    page_type: str
    category: str
    score: float
    scores: dict[str, Any] = field(default_factory=dict)
    slug: str | None = None
    snippet: str = ""
    draft: bool = False
    plan_id: int | None = None
    archived: bool = False  # every source of the page is archived (only with include_archived)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResults:
    hits: list[SearchHit]
    notes: list[str] = field(default_factory=list)  # e.g. "vector index unavailable: full text only"
    mode: str = "hybrid"

    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def to_list(self) -> list[dict[str, Any]]:
        return [h.to_dict() for h in self.hits]


def terms(text: str) -> list[str]:
    """The searchable words of `text`, lower case, in order, without duplicates; stop words
    are dropped unless nothing else is left."""
    tokens = [t.lower() for t in _TOKEN.findall(text or "")]
    content = [t for t in tokens if t not in STOPWORDS and (len(t) > 1 or t.isdigit())] or tokens
    return list(dict.fromkeys(content))


def fts_query(text: str) -> str | None:
    """A safe FTS5 MATCH expression for free text: every word quoted, words OR-ed.

    Quoting turns FTS operators a user may type (AND, NEAR, *, :, ^, quotes,
    parentheses) into plain words, so no input can make the query fail.
    """
    words = terms(text)[:MAX_QUERY_TERMS]
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


_open_indexes: dict[tuple[str, str], VectorSearcher] = {}
_OPEN_INDEXES_MAX = 4


def open_vector_index(ws: Workspace) -> tuple[VectorSearcher | None, str | None]:
    """(the workspace's vector index, None) or (None, why it cannot be used).

    The index is kept for the next search of the same workspace (and embedder): it
    holds its Chroma client open and notices writes itself (see kompl.vectors).
    """
    try:
        from kompl.vectors import VectorIndex
    except ImportError:
        return None, "vector search unavailable (kompl.vectors is not installed): full-text results only"
    key = (str(ws.vectors_dir), str(getattr(ws.settings, "embedder", "")))
    if key in _open_indexes:
        return _open_indexes[key], None
    try:
        index = VectorIndex(ws)
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable store degrades to full text, visibly
        return None, f"vector index could not be opened ({exc}): full-text results only"
    while len(_open_indexes) >= _OPEN_INDEXES_MAX:
        old = _open_indexes.pop(next(iter(_open_indexes)))
        getattr(old, "close", lambda: None)()
    _open_indexes[key] = index
    return index, None


def search(
    ws: Workspace,
    conn: sqlite3.Connection,
    query: str,
    *,
    limit: int = 10,
    page_type: str | None = None,
    category: str | None = None,
    include_drafts: bool = False,
    include_archived: bool = False,
    mode: str = "hybrid",
    vector_index: VectorSearcher | None | bool = None,
) -> SearchResults:
    """Rank pages for `query`. `vector_index`: None opens the workspace's index, False skips it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    limit = max(1, int(limit))
    pool = max(POOL_MIN, limit * 3)
    notes: list[str] = []
    where, args = _page_filter(include_archived, page_type, category)

    # The vector query (embedding + nearest chunks, no SQLite) starts first, in a worker
    # thread, so that in hybrid mode it runs while SQLite ranks the full text.
    pending: Future | None = None
    index: Any = None
    if mode in ("hybrid", "vector") and query.strip():
        index = vector_index
        if index is None:
            index, why = open_vector_index(ws)
            if why:
                notes.append(why)
        if index:
            pending = _vector_worker().submit(index.query, query, k=pool * CHUNKS_PER_PAGE)

    fts: list[tuple[tuple, float, str]] = []  # (key, bm25, snippet), best first
    match: str | None = None
    if mode in ("hybrid", "fts"):
        match = fts_query(query)
        if match is None:
            notes.append("the query has no searchable words")
        else:
            fts = _fts_pages(conn, match, where, args, pool)
            if include_drafts:
                fts = sorted(fts + _fts_drafts(conn, match, page_type, category, include_archived, pool),
                             key=lambda item: item[1])[:pool]

    vec: list[tuple[tuple, float, str]] = []  # (key, similarity, chunk text), best first
    if pending is not None:
        try:
            vec = _vector_pages(conn, pending.result(), where, args, pool)
        except Exception as exc:  # noqa: BLE001 - a failing vector store must not lose the full-text results
            notes.append(f"vector search failed ({type(exc).__name__}: {exc}): full-text results only")

    fused: dict[tuple, dict[str, Any]] = {}
    for rank, (key, bm25, snippet) in enumerate(fts, 1):
        fused.setdefault(key, {})
        fused[key].update(fts_rank=rank, bm25=round(bm25, 4))
        if snippet:
            fused[key]["snippet"] = snippet
    for rank, (key, similarity, text) in enumerate(vec, 1):
        entry = fused.setdefault(key, {})
        entry.update(vector_rank=rank, vector=round(float(similarity), 4))
        entry.setdefault("snippet", _clip(text, 240))
    hits = _hits(conn, fused, _leg_weights(index, mode))
    hits.sort(key=lambda h: (-h.score, h.title))
    hits = hits[:limit]
    wanted = [h.page_id for h in hits if not h.draft and h.scores.get("fts_rank")]
    if wanted and match:
        snippets = _fts_snippets(conn, match, wanted)
        for hit in hits:
            if not hit.draft and snippets.get(hit.page_id):
                hit.snippet = snippets[hit.page_id]
    return SearchResults(hits=hits, notes=notes, mode=mode)


# --- the legs -----------------------------------------------------------------------------

# The rule of kompl.wiki.store.visible_page_ids_sql() (no sources, or at least one active
# source), checked per candidate row: `p.page_id IN (that subquery)` first lists every
# visible page, which costs ~40 ms at 10,000 pages on every search.
_VISIBLE = (
    "(NOT EXISTS (SELECT 1 FROM page_sources ps WHERE ps.page_id = p.page_id)"
    " OR EXISTS (SELECT 1 FROM page_sources ps JOIN sources s ON s.source_id = ps.source_id"
    " WHERE ps.page_id = p.page_id AND s.status = 'active'))"
)


def _page_filter(include_archived: bool, page_type: str | None, category: str | None) -> tuple[str, list]:
    where, args = ["p.status = 'active'"], []
    if not include_archived:
        where.append(_VISIBLE)
    if page_type:
        where.append("p.page_type = ?")
        args.append(page_type)
    if category:
        where.append("p.category = ?")
        args.append(category)
    return " AND ".join(where), args


def _fts_pages(conn: sqlite3.Connection, match: str, where: str, args: list, pool: int) -> list:
    """The `pool` best pages for `match` that pass `where`, best first, as (key, bm25, "").

    The best matches are ranked first and filtered after, asking for more while too
    few pass: filtering inside the ranking query runs the filter on every matching
    row (most pages, for a long question). No snippet either: SQLite would make one
    for every matching row before sorting; `_fts_snippets` makes those shown.
    """
    want = pool * 2
    while True:
        ranked = conn.execute(
            f"SELECT page_id, bm25(pages_fts, {TITLE_WEIGHT}, {BODY_WEIGHT}, 0.0) AS rank FROM pages_fts"
            " WHERE pages_fts MATCH ? ORDER BY rank LIMIT ?", (match, want)).fetchall()
        allowed = _allowed(conn, [int(r[0]) for r in ranked], where, args)
        found = [(("page", int(r[0])), float(r[1]), "") for r in ranked if int(r[0]) in allowed]
        if len(found) >= pool or len(ranked) < want:
            return found[:pool]
        want *= 4


def _allowed(conn: sqlite3.Connection, page_ids: list[int], where: str, args: list) -> set[int]:
    """Those of `page_ids` that pass the page filter `where`."""
    allowed: set[int] = set()
    for start in range(0, len(page_ids), 500):
        part = page_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        allowed.update(r[0] for r in conn.execute(
            f"SELECT p.page_id FROM pages p WHERE p.page_id IN ({marks}) AND {where}", [*part, *args]))
    return allowed


def _fts_snippets(conn: sqlite3.Connection, match: str, page_ids: list[int]) -> dict[int, str]:
    """The full-text snippet of each of `page_ids` for `match`."""
    if not page_ids:
        return {}
    marks = ",".join("?" * len(page_ids))
    rows = conn.execute(
        "SELECT page_id, snippet(pages_fts, 1, '[', ']', '…', 16) FROM pages_fts"
        f" WHERE pages_fts MATCH ? AND page_id IN ({marks})", [match, *page_ids]).fetchall()
    return {int(r[0]): r[1] or "" for r in rows}


def _fts_drafts(conn: sqlite3.Connection, match: str, page_type: str | None, category: str | None,
                include_archived: bool, pool: int) -> list:
    """Drafted plans ranked with the same MATCH, through a temporary FTS table of the outbox."""
    sql = "SELECT plan_id, title, draft, page_type, category, inputs FROM page_plans WHERE status = 'drafted' AND draft IS NOT NULL"
    args: list = []
    if page_type:
        sql += " AND page_type = ?"
        args.append(page_type)
    if category:
        sql += " AND category = ?"
        args.append(category)
    rows = conn.execute(sql, args).fetchall()
    if not include_archived:
        active = {r[0] for r in conn.execute("SELECT source_id FROM sources WHERE status = 'active'")}
        rows = [r for r in rows if not _sources_of(r["inputs"]) or _sources_of(r["inputs"]) & active]
    if not rows:
        return []
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.kompl_draft_fts USING fts5"
                 " (title, body, plan_id UNINDEXED, tokenize = 'porter unicode61')")
    conn.execute("DELETE FROM temp.kompl_draft_fts")
    conn.executemany("INSERT INTO temp.kompl_draft_fts (title, body, plan_id) VALUES (?,?,?)",
                     [(r["title"], r["draft"], r["plan_id"]) for r in rows])
    found = conn.execute(
        f"SELECT plan_id, bm25(kompl_draft_fts, {TITLE_WEIGHT}, {BODY_WEIGHT}, 0.0) AS rank,"
        " snippet(kompl_draft_fts, 1, '[', ']', '…', 16) FROM temp.kompl_draft_fts"
        " WHERE kompl_draft_fts MATCH ? ORDER BY rank LIMIT ?", (match, pool)).fetchall()
    return [(("draft", int(r[0])), float(r[1]), r[2] or "") for r in found]


def _sources_of(inputs: str | None) -> set[str]:
    try:
        return set(json.loads(inputs or "{}").get("sources") or [])
    except (ValueError, AttributeError):
        return set()


_worker: ThreadPoolExecutor | None = None
_worker_lock = threading.Lock()


def _vector_worker() -> ThreadPoolExecutor:
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kompl-vectors")
        return _worker


def _vector_pages(conn: sqlite3.Connection, chunk_hits: list, where: str, args: list, pool: int) -> list:
    """The pages of `chunk_hits` (an index's answer) that pass `where`, each by its best chunk, best first."""
    best: dict[int, Any] = {}
    for hit in chunk_hits:
        page_id = int(hit.page_id)
        if page_id not in best or float(hit.score) > float(best[page_id].score):
            best[page_id] = hit
    if not best:
        return []
    allowed = _allowed(conn, list(best), where, args)
    ranked = sorted((h for pid, h in best.items() if pid in allowed), key=lambda h: -float(h.score))
    return [(("page", int(h.page_id)), float(h.score), h.text or "") for h in ranked[:pool]]


# --- fusion -------------------------------------------------------------------------------

def _leg_weights(index: Any, mode: str) -> dict[str, float]:
    """Each leg's weight in the fusion; one leg alone always weighs 1 (the light signals stay tie-breakers)."""
    name = str(getattr(getattr(index, "embedder", None), "name", "") or "")
    lexical = mode == "hybrid" and name in LEXICAL_EMBEDDERS
    return {"fts_rank": 1.0, "vector_rank": LEXICAL_VECTOR_WEIGHT if lexical else 1.0}


def _hits(conn: sqlite3.Connection, fused: dict[tuple, dict[str, Any]], weights: dict[str, float]) -> list[SearchHit]:
    page_ids = [key[1] for key in fused if key[0] == "page"]
    plan_ids = [key[1] for key in fused if key[0] == "draft"]
    pages = _page_rows(conn, page_ids)
    plans = {r["plan_id"]: r for r in _rows_in(
        conn, "SELECT plan_id, page_id, title, page_type, category, inputs, updated_at FROM page_plans WHERE plan_id IN ({})",
        plan_ids)}
    active = {r[0] for r in conn.execute("SELECT source_id FROM sources WHERE status = 'active'")} if plans else set()
    now = datetime.now(UTC)
    hits = []
    for key, parts in fused.items():
        if key[0] == "page":
            row = pages.get(key[1])
            if row is None:
                continue
            n_active, n_all = row["n_active"], row["n_sources"]
            hit = SearchHit(page_id=key[1], title=row["title"], page_type=row["page_type"], category=row["category"],
                            score=0.0, slug=row["slug"], archived=bool(n_all) and not n_active)
            updated = row["updated_at"]
        else:
            plan = plans.get(key[1])
            if plan is None:
                continue
            srcs = _sources_of(plan["inputs"])
            n_active = len(srcs & active)
            hit = SearchHit(page_id=plan["page_id"], title=plan["title"], page_type=plan["page_type"],
                            category=plan["category"], score=0.0, draft=True, plan_id=key[1],
                            archived=bool(srcs) and not n_active)
            updated = plan["updated_at"]
        rrf = sum(weight / (RRF_K + parts[leg]) for leg, weight in weights.items() if parts.get(leg))
        sources = SOURCE_WEIGHT * n_active / (n_active + 1)
        recency = RECENCY_WEIGHT * 0.5 ** (_age_days(updated, now) / RECENCY_HALF_LIFE_DAYS)
        hit.snippet = parts.get("snippet", "")
        hit.scores = {
            "fts_rank": parts.get("fts_rank"), "bm25": parts.get("bm25"),
            "vector_rank": parts.get("vector_rank"), "vector": parts.get("vector"),
            "rrf": round(rrf, 6), "sources": round(sources, 6), "recency": round(recency, 6),
            "active_sources": n_active,
        }
        hit.score = round(rrf + sources + recency, 6)
        hits.append(hit)
    return hits


def _page_rows(conn: sqlite3.Connection, page_ids: list[int]) -> dict[int, sqlite3.Row]:
    sql = (
        "SELECT p.page_id, p.title, p.page_type, p.category, p.slug, p.updated_at,"
        " (SELECT COUNT(*) FROM page_sources ps WHERE ps.page_id = p.page_id) AS n_sources,"
        " (SELECT COUNT(*) FROM page_sources ps JOIN sources s ON s.source_id = ps.source_id"
        "   WHERE ps.page_id = p.page_id AND s.status = 'active') AS n_active"
        " FROM pages p WHERE p.page_id IN ({})"
    )
    return {r["page_id"]: r for r in _rows_in(conn, sql, page_ids)}


def _rows_in(conn: sqlite3.Connection, sql: str, ids: list) -> list[sqlite3.Row]:
    out: list[sqlite3.Row] = []
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        out.extend(conn.execute(sql.format(",".join("?" * len(part))), part).fetchall())
    return out


def _age_days(stamp: str | None, now: datetime) -> float:
    try:
        then = datetime.fromisoformat(stamp or "")
    except ValueError:
        return 10_000.0
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return max(0.0, (now - then).total_seconds() / 86400)


def _clip(text: str, chars: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


__all__ = ["MODES", "SearchHit", "SearchResults", "fts_query", "open_vector_index", "search", "terms"]
