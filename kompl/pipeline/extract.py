"""Extraction: entities, concepts, claims and relationships from every active source.

For each active source not yet extracted at its current (content hash,
`EXTRACTOR_VERSION`, model), two passes run:

1. A local pass (spaCy through `kompl.nlp`): named entities with counts,
   keyphrases scored by TF-IDF against the corpus vocabulary persisted in
   `term_df` (kept in step with `extractions` by triggers, so it grows per
   source instead of being refitted), and a document profile.
2. A model pass through the gateway: one `Task` per chunk, the local results
   given as hints. Long sources are split into overlapping chunks sized from
   the model's budget; the chunk results are merged (the same entity across
   chunks by normalised name with counts summed, claims deduplicated). There
   is no input cap and no entity ceiling.

Results are stored per source, replacing the previous ones in one transaction
with an `extract` audit row. An unchanged source costs no model call on a
re-run; a failed model call leaves its source pending, with the error in the
report. This module owns `extractions`, `entity_mentions`, `claims`,
`relationship_mentions` and `term_df`.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kompl import db
from kompl.text import norm_name
from kompl.pipeline import StageResult
from kompl.workspace import Workspace

EXTRACTOR_VERSION = "2"  # bump when extraction output changes: sources are re-extracted
PROMPT = "extract"
# Source characters per model call, by model: the offline model has no context
# window to respect; real models get room for the instructions and a long reply.
OFFLINE_CHUNK_TOKENS = 20_000
MODEL_CHUNK_TOKENS = 6_000
OVERLAP = 0.08  # share of a chunk repeated at the start of the next one
KEYPHRASES_STORED = 40
HINT_KEYPHRASES = 25
BATCH_CHUNKS = 16  # chunks sent to the gateway at once (bounded so the NLP cache keeps them)

ENTITY_TYPES = ("PERSON", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK", "LAW", "NORP", "FAC", "DATE", "MONEY", "OTHER")
_TYPE_ALIASES = {"WORK_OF_ART": "WORK", "ORGANIZATION": "ORG", "ORGANISATION": "ORG", "COMPANY": "ORG",
                 "LOCATION": "LOC", "PLACE": "GPE", "COUNTRY": "GPE", "CITY": "GPE", "PEOPLE": "PERSON"}

ProgressFn = Callable[[str, dict], None]


# --- the model contract --------------------------------------------------------------------

class Entity(BaseModel):
    name: str
    type: str = "OTHER"
    mentions: int = Field(default=1, ge=0)
    context: str = ""


class Concept(BaseModel):
    name: str
    description: str = ""


class Claim(BaseModel):
    claim: str
    confidence: float = Field(default=0.5, ge=0, le=1)
    entities_involved: list[str] = Field(default_factory=list)
    quote: str = ""


class Relationship(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    type: str = "related_to"
    description: str = ""


class Contradiction(BaseModel):
    claim: str
    conflicts_with: str = ""
    explanation: str = ""


class ExtractionResult(BaseModel):
    """What the model returns for one chunk (and, merged, for one source)."""

    title: str = ""
    summary: str = ""
    entities: list[Entity] = Field(default_factory=list)
    concepts: list[Concept] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)
    model: str = ""  # who wrote it (the offline model names itself and its NLP pipeline)

    @field_validator("entities", "concepts", "claims", "relationships", "contradictions", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    def to_json(self) -> dict:
        return self.model_dump(by_alias=True, mode="json")


# --- report --------------------------------------------------------------------------------

@dataclass
class ExtractReport(StageResult):
    model: str = ""
    pipeline: dict = field(default_factory=dict)
    extracted: list[dict] = field(default_factory=list)
    up_to_date: int = 0
    skipped: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    model_calls: int = 0
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- chunks --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    overlap: int  # characters at the start repeated from the previous chunk


_PARA = re.compile(r"\n[ \t]*\n")
_SENT_END = re.compile(r"(?<=[.!?…])[\"'”’)]*\s+")


def chunk_tokens_for(ws: Workspace, model: str, chunk_tokens: int | None = None) -> int:
    """Source tokens per model call: the argument, the `extract_chunk_tokens` setting, or a default."""
    if chunk_tokens:
        return int(chunk_tokens)
    configured = ws.settings.extract_chunk_tokens
    if configured:
        return int(configured)
    from kompl.llm import OFFLINE_MODEL

    return OFFLINE_CHUNK_TOKENS if model == OFFLINE_MODEL else MODEL_CHUNK_TOKENS


def chunk_text(text: str, max_chars: int, overlap_chars: int | None = None) -> list[Chunk]:
    """Split `text` into chunks of at most `max_chars`, cut at paragraph or sentence ends.

    Consecutive chunks overlap by about `overlap_chars` (whole sentences where
    possible) so a statement cut at a boundary is seen whole once. Every
    character belongs to some chunk: nothing is dropped.
    """
    max_chars = max(200, int(max_chars))
    if overlap_chars is None:
        overlap_chars = int(max_chars * OVERLAP)
    overlap_chars = min(overlap_chars, max_chars // 3)
    if len(text) <= max_chars:
        return [Chunk(0, len(text), 0)]
    cuts = _cut_points(text)
    chunks: list[Chunk] = []
    start, overlap = 0, 0
    while start < len(text):
        limit = start + max_chars
        if limit >= len(text):
            chunks.append(Chunk(start, len(text), overlap))
            break
        # The last paragraph/sentence end before the limit (well past the overlap), else a space.
        floor = start + overlap + (max_chars - overlap) // 3
        end = _last_cut(cuts, floor, limit) or _last_space(text, floor, limit) or limit
        chunks.append(Chunk(start, end, overlap))
        # The next chunk starts at a sentence boundary at least overlap_chars before `end`
        # (at most a third of a chunk back), else at the nearest boundary after that point.
        back = None
        if overlap_chars:
            back = _last_cut(cuts, max(start, end - max_chars // 3) - 1, end - overlap_chars)
            back = back if back is not None and back < end else _first_cut(cuts, end - overlap_chars, end)
        next_start = back if back is not None and back > start else end
        overlap = end - next_start
        start = next_start
    return chunks


def _cut_points(text: str) -> list[int]:
    points = {m.end() for m in _PARA.finditer(text)} | {m.end() for m in _SENT_END.finditer(text)}
    return sorted(points)


def _last_cut(cuts: list[int], lo: int, hi: int) -> int | None:
    import bisect

    i = bisect.bisect_right(cuts, hi) - 1
    return cuts[i] if i >= 0 and cuts[i] > lo else None


def _first_cut(cuts: list[int], lo: int, hi: int) -> int | None:
    import bisect

    i = bisect.bisect_left(cuts, lo)
    return cuts[i] if i < len(cuts) and cuts[i] < hi else None


def _last_space(text: str, lo: int, hi: int) -> int | None:
    i = text.rfind(" ", lo, hi)
    return i + 1 if i > lo else None


# --- local pass ----------------------------------------------------------------------------

@dataclass
class LocalPass:
    entities: list[dict]  # {name, type, count} over the whole source
    keyphrases: list[dict]  # {phrase, key, score, count}, best first
    terms: list[str]  # distinct vocabulary terms of the source (feeds term_df)
    profile: dict
    chunk_hints: list[dict]  # hints handed to the model, one per chunk

    def to_json(self, pipeline: dict) -> dict:
        return {"pipeline": pipeline, "profile": self.profile, "entities": self.entities,
                "keyphrases": self.keyphrases, "terms": self.terms}


def local_pass(conn: sqlite3.Connection, source_id: str, text: str, chunks: list[Chunk]) -> LocalPass:
    """spaCy entities, TF-IDF keyphrases against the corpus vocabulary, and a profile."""
    from kompl import nlp

    ent_counts: Counter = Counter()
    ent_surface: dict[str, Counter] = {}
    ent_labels: dict[str, Counter] = {}
    values: Counter = Counter()
    tf: Counter = Counter()
    phrase_surface: dict[str, Counter] = {}
    words = sentences = 0
    per_chunk: list[tuple[Counter, dict[str, str], dict[str, Counter], set[str]]] = []
    for chunk in chunks:
        analysis = nlp.analyze(text[chunk.start:chunk.end])
        c_counts: Counter = Counter()
        c_names: dict[str, Counter] = {}
        c_labels: dict[str, Counter] = {}
        c_keys: set[str] = set()
        for m in analysis.mentions:
            fresh = m.start >= chunk.overlap  # not already counted in the previous chunk
            if not m.is_entity:
                values[m.label] += fresh
                continue
            key = norm_name(m.text)
            if not key:
                continue
            c_counts[key] += 1
            c_names.setdefault(key, Counter())[m.text] += 1
            c_labels.setdefault(key, Counter())[m.label] += 1
            if fresh:
                ent_counts[key] += 1
                ent_surface.setdefault(key, Counter())[m.text] += 1
                ent_labels.setdefault(key, Counter())[m.label] += 1
        for p in analysis.phrases:
            c_keys.add(p.key)
            if analysis.sentences[p.sent].start >= chunk.overlap:
                tf[p.key] += 1
                phrase_surface.setdefault(p.key, Counter())[p.text] += 1
        fresh_sents = [s for s in analysis.sentences if s.start >= chunk.overlap]
        sentences += len(fresh_sents)
        words += sum(s.words for s in fresh_sents)
        per_chunk.append((c_counts, c_names, c_labels, c_keys))

    idf = _idf(conn, source_id, sorted(tf))
    scored = sorted(
        ((tf[k] * idf[k] * (1 + 0.25 * (len(k.split()) - 1)), k) for k in tf),
        key=lambda t: (-t[0], t[1]),
    )
    keyphrases = [
        {"phrase": _best(phrase_surface[k]), "key": k, "score": round(s, 3), "count": tf[k]}
        for s, k in scored[:KEYPHRASES_STORED]
    ]
    entities = [
        {"name": _best(ent_surface[k]), "type": _type_of(ent_labels[k]), "count": c}
        for k, c in sorted(ent_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    mentions = sum(ent_counts.values())
    profile = {
        "chars": len(text), "words": words, "sentences": sentences, "chunks": len(chunks),
        "entity_mentions": mentions, "distinct_entities": len(ent_counts),
        "entity_density": round(100.0 * mentions / words, 2) if words else 0.0,  # per 100 words
        "values": dict(sorted(values.items())),
    }
    hints = []
    for i, (chunk, (c_counts, c_names, c_labels, c_keys)) in enumerate(zip(chunks, per_chunk)):
        hints.append({
            "chunk": i + 1, "chunks": len(chunks), "overlap_chars": chunk.overlap,
            "entities": [{"name": _best(c_names[k]), "type": _type_of(c_labels[k]), "count": n}
                         for k, n in sorted(c_counts.items(), key=lambda kv: (-kv[1], kv[0]))],
            "keyphrases": [kp for kp in keyphrases if kp["key"] in c_keys][:HINT_KEYPHRASES],
        })
    return LocalPass(entities, keyphrases, sorted(tf), profile, hints)


def _idf(conn: sqlite3.Connection, source_id: str, terms: list[str]) -> dict[str, float]:
    """Smoothed IDF of `terms` over the other extracted sources plus this one."""
    old = conn.execute("SELECT local FROM extractions WHERE source_id = ?", (source_id,)).fetchone()
    own_old = set(json.loads(old[0]).get("terms", [])) if old else set()
    n_docs = conn.execute("SELECT COUNT(*) FROM extractions WHERE source_id != ?", (source_id,)).fetchone()[0] + 1
    df: dict[str, int] = {}
    for i in range(0, len(terms), 500):
        batch = terms[i:i + 500]
        marks = ",".join("?" * len(batch))
        for term, count in conn.execute(f"SELECT term, df FROM term_df WHERE term IN ({marks})", batch):
            df[term] = count - (term in own_old)
    return {t: math.log((1 + n_docs) / (1 + df.get(t, 0) + 1)) + 1 for t in terms}


def _best(forms: Counter) -> str:
    return max(forms.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]


def _type_of(labels: Counter) -> str:
    from kompl.nlp import ENTITY_LABELS

    label = max(labels.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return ENTITY_LABELS.get(label, "OTHER")


# --- merge ---------------------------------------------------------------------------------

def merge_results(parts: list[ExtractionResult], title: str = "") -> ExtractionResult:
    """One result from the chunk results: entities by normalised name (counts summed),
    concepts by name, claims by quote, relationships by (from, to, type)."""
    if len(parts) == 1:
        only = parts[0].model_copy(deep=True)
        only.title = only.title or title
        return only
    entities: dict[str, dict] = {}
    for part in parts:
        for e in part.entities:
            key = norm_name(e.name)
            if not key:
                continue
            slot = entities.setdefault(key, {"names": Counter(), "types": Counter(), "mentions": 0, "context": e.context})
            slot["names"][e.name] += max(1, e.mentions)
            slot["types"][_norm_type(e.type)] += max(1, e.mentions)
            slot["mentions"] += e.mentions
            slot["context"] = slot["context"] or e.context
    _merge_surnames(entities)
    merged_entities = [
        Entity(name=_best(s["names"]), type=max(s["types"].items(), key=lambda kv: (kv[1], kv[0]))[0],
               mentions=s["mentions"], context=s["context"])
        for s in entities.values()
    ]
    merged_entities.sort(key=lambda e: -e.mentions)
    concepts: dict[str, Concept] = {}
    for part in parts:
        for c in part.concepts:
            key = norm_name(c.name)
            if key and key not in concepts:
                concepts[key] = c.model_copy()
            elif key and not concepts[key].description:
                concepts[key].description = c.description
    claims: dict[str, Claim] = {}
    for part in parts:
        for c in part.claims:
            key = _SPACES.sub(" ", (c.quote or c.claim)).strip().lower()
            seen = claims.get(key)
            if seen is None:
                claims[key] = c.model_copy(deep=True)
            else:
                seen.confidence = max(seen.confidence, c.confidence)
                seen.entities_involved = list(dict.fromkeys(seen.entities_involved + c.entities_involved))
    rels: dict[tuple, Relationship] = {}
    for part in parts:
        for r in part.relationships:
            rels.setdefault((norm_name(r.from_), norm_name(r.to), r.type.lower()), r.model_copy())
    contradictions: dict[str, Contradiction] = {}
    for part in parts:
        for c in part.contradictions:
            contradictions.setdefault(_SPACES.sub(" ", c.claim + "|" + c.conflicts_with).lower(), c)
    summary = " ".join(dict.fromkeys(p.summary.strip() for p in parts if p.summary.strip()))
    return ExtractionResult(
        title=next((p.title for p in parts if p.title), title), summary=summary,
        entities=merged_entities, concepts=list(concepts.values()), claims=list(claims.values()),
        relationships=list(rels.values()), contradictions=list(contradictions.values()),
        model=next((p.model for p in parts if p.model), ""),
    )


_SPACES = re.compile(r"\s+")


def _merge_surnames(entities: dict[str, dict]) -> None:
    """A one-word PERSON name that ends or starts exactly one longer PERSON name joins it."""
    persons = [k for k, s in entities.items() if s["types"].get("PERSON") and len(k.split()) > 1]
    for key in [k for k in entities if len(k.split()) == 1 and entities[k]["types"].get("PERSON")]:
        owners = [p for p in persons if p.split()[-1] == key or p.split()[0] == key]
        if len(owners) == 1:
            short, into = entities.pop(key), entities[owners[0]]
            into["mentions"] += short["mentions"]
            into["types"]["PERSON"] += sum(short["types"].values())


def _norm_type(value: str) -> str:
    t = (value or "").strip().upper().replace(" ", "_")
    t = _TYPE_ALIASES.get(t, t)
    return t if t in ENTITY_TYPES else "OTHER"


# --- store ---------------------------------------------------------------------------------

def store_extraction(
    conn: sqlite3.Connection, source: dict, text: str, *, model: str, chunks: int,
    local: dict, result: ExtractionResult,
) -> dict:
    """Replace the source's extraction rows with `result`, in one transaction with an audit row."""
    source_id = source["source_id"]
    mentions: dict[tuple[str, str], list] = {}
    for e in result.entities:
        key = norm_name(e.name)
        if not key:
            continue
        row = mentions.setdefault((key, "entity"), [e.name, key, _norm_type(e.type), "entity", 0, e.context, ""])
        row[4] += e.mentions
    plain = None
    for c in result.concepts:
        key = norm_name(c.name)
        if key and (key, "concept") not in mentions:
            if plain is None:  # markdown syntax and front matter blanked out, offsets kept
                from kompl.nlp import mask_markdown

                plain = mask_markdown(text)
            mentions[(key, "concept")] = [c.name, key, "CONCEPT", "concept", _count(plain, c.name),
                                          _context(plain, c.name), c.description]
    claims = [
        (c.claim, c.quote or c.claim, c.confidence, json.dumps(c.entities_involved, ensure_ascii=False),
         _find_quote(text, c.quote))
        for c in result.claims
    ]
    rels = [(r.from_, r.to, r.type, r.description) for r in result.relationships if r.from_ and r.to]
    summary = {"entities": sum(1 for k in mentions if k[1] == "entity"),
               "concepts": sum(1 for k in mentions if k[1] == "concept"),
               "claims": len(claims), "relationships": len(rels)}
    with db.transaction(conn, "extract", target=source_id,
                        details={"model": model, "extractor_version": EXTRACTOR_VERSION, "chunks": chunks, **summary}):
        for table in ("entity_mentions", "claims", "relationship_mentions", "extractions"):
            conn.execute(f"DELETE FROM {table} WHERE source_id = ?", (source_id,))
        conn.execute(
            "INSERT INTO extractions (source_id, content_hash, extractor_version, model, chunks, local, result,"
            " extracted_at) VALUES (?,?,?,?,?,?,?,?)",
            (source_id, source["content_hash"], EXTRACTOR_VERSION, model, chunks,
             json.dumps(local, ensure_ascii=False), json.dumps(result.to_json(), ensure_ascii=False), db.utcnow()),
        )
        conn.executemany(
            "INSERT INTO entity_mentions (source_id, name, norm, type, kind, count, context, description)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(source_id, *row) for row in mentions.values()],
        )
        conn.executemany(
            "INSERT INTO claims (source_id, claim, quote, confidence, entities, quote_start) VALUES (?,?,?,?,?,?)",
            [(source_id, *row) for row in claims],
        )
        conn.executemany(
            "INSERT INTO relationship_mentions (source_id, from_name, to_name, type, description) VALUES (?,?,?,?,?)",
            [(source_id, *row) for row in rels],
        )
    return summary


def _find_quote(text: str, quote: str) -> int | None:
    """Offset of the quote in the source, tolerating whitespace differences; None if absent."""
    if not quote:
        return None
    at = text.find(quote)
    if at >= 0:
        return at
    words = quote.split()
    if not words:
        return None
    match = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return match.start() if match else None


def _count(text: str, name: str) -> int:
    return max(1, len(re.findall(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.I)))


def _context(text: str, name: str) -> str:
    match = re.search(rf"[^.!?\n]*(?<!\w){re.escape(name)}(?!\w)[^.!?\n]*[.!?]?", text, re.I)
    return _SPACES.sub(" ", match.group(0)).strip() if match else ""


# --- the stage -----------------------------------------------------------------------------

def extraction_state(conn: sqlite3.Connection) -> dict[str, tuple[str, str, str]]:
    """source_id -> (content_hash, extractor_version, model) of its stored extraction."""
    rows = conn.execute("SELECT source_id, content_hash, extractor_version, model FROM extractions")
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def get_extraction(conn: sqlite3.Connection, source_id: str) -> dict | None:
    row = conn.execute("SELECT * FROM extractions WHERE source_id = ?", (source_id,)).fetchone()
    if row is None:
        return None
    out = dict(row)
    out["local"], out["result"] = json.loads(out["local"]), json.loads(out["result"])
    return out


def pending_sources(
    conn: sqlite3.Connection, model: str, source_ids: list[str] | None = None, *, force: bool = False,
) -> tuple[list[dict], int, list[dict]]:
    """(sources to extract, how many are up to date, skipped [{source_id, reason}])."""
    from kompl.ingest import store

    state = extraction_state(conn)
    if source_ids:
        rows, skipped = [], []
        for sid in dict.fromkeys(source_ids):
            row = store.get(conn, sid)
            if row is None:
                skipped.append({"source_id": sid, "reason": "no such source"})
            elif row["status"] != "active":
                skipped.append({"source_id": sid, "reason": f"{row['status']} (not extracted)"})
            else:
                rows.append(row)
    else:
        rows, skipped = store.list_sources(conn, "active"), []
    todo = [r for r in rows if force or state.get(r["source_id"]) != (r["content_hash"], EXTRACTOR_VERSION, model)]
    return todo, len(rows) - len(todo), skipped


def extract_pending(
    ws: Workspace, conn: sqlite3.Connection, *, model: str | None = None,
    source_ids: list[str] | None = None, on_progress: ProgressFn | None = None,
    chunk_tokens: int | None = None, force: bool = False, gateway: Any = None,
) -> ExtractReport:
    """Extract every active source (or `source_ids`) not extracted at its current key.

    `chunk_tokens` overrides the per-call budget of source text; `force`
    re-extracts up-to-date sources; `gateway` replaces the default `Gateway`.
    Progress events: ("start", {total}), ("source", {source_id, title, status, ...}).
    """
    from kompl import nlp
    from kompl.ingest import store
    from kompl.llm import Gateway

    started = time.perf_counter()
    gw = gateway or Gateway(ws, conn, model=model)
    report = ExtractReport(model=gw.model)
    todo, report.up_to_date, report.skipped = pending_sources(conn, gw.model, source_ids, force=force)
    emit = on_progress or (lambda event, info: None)
    emit("start", {"total": len(todo)})
    if not todo:
        report.seconds = time.perf_counter() - started
        return report
    report.pipeline = nlp.pipeline_info().to_dict()
    notice = nlp.fallback_notice()
    if notice:
        report.notices.append(notice)
    max_chars = chunk_tokens_for(ws, gw.model, chunk_tokens) * 4

    batch: list[dict] = []
    batch_chunks = 0
    for source in todo:
        t0 = time.perf_counter()
        try:
            text = store.read_markdown(ws, source["source_id"])
        except OSError as exc:
            report.failed.append(_failure(source, f"could not read its markdown: {exc}"))
            emit("source", {"source_id": source["source_id"], "title": source["title"], "status": "failed"})
            continue
        chunks = chunk_text(text, max_chars)
        local = local_pass(conn, source["source_id"], text, chunks)
        batch.append({"source": source, "text": text, "chunks": chunks, "local": local, "t0": t0,
                      "local_s": time.perf_counter() - t0})
        batch_chunks += len(chunks)
        if batch_chunks >= BATCH_CHUNKS:
            _model_pass(conn, gw, batch, report, emit)
            batch, batch_chunks = [], 0
    if batch:
        _model_pass(conn, gw, batch, report, emit)
    report.seconds = time.perf_counter() - started
    return report


def _model_pass(conn, gw, batch: list[dict], report: ExtractReport, emit: ProgressFn) -> None:
    from kompl.llm import LLMError, Task

    tasks: list[Task] = []
    for item in batch:
        source, text = item["source"], item["text"]
        item["tasks"] = range(len(tasks), len(tasks) + len(item["chunks"]))
        for chunk, hints in zip(item["chunks"], item["local"].chunk_hints):
            tasks.append(Task(
                purpose="extract", prompt=PROMPT, schema=ExtractionResult,
                variables={"title": source["title"], "text": text[chunk.start:chunk.end], "hints": hints},
                meta={"source_id": source["source_id"], "chunk": hints["chunk"], "chunks": hints["chunks"]},
            ))
    t_model = time.perf_counter()
    results = gw.run_many(tasks)
    model_s = time.perf_counter() - t_model
    report.model_calls += len(tasks)
    total_chars = sum(len(item["text"]) for item in batch) or 1
    for item in batch:
        source = item["source"]
        parts = [results[i] for i in item["tasks"]]
        errors = [p for p in parts if isinstance(p, BaseException)]
        if errors:
            failed_chunks = [i + 1 for i, p in enumerate(parts) if isinstance(p, BaseException)]
            report.failed.append(_failure(source, f"chunk(s) {failed_chunks} of {len(parts)}: {errors[0]}"))
            emit("source", {"source_id": source["source_id"], "title": source["title"], "status": "failed"})
            continue
        merged = merge_results([p for p in parts if not isinstance(p, LLMError)], source["title"])
        local = item["local"].to_json(report.pipeline)
        counts = store_extraction(conn, source, item["text"], model=gw.model, chunks=len(item["chunks"]),
                                  local=local, result=merged)
        # The model pass ran for the whole batch at once; its time is shared out by size.
        seconds = item["local_s"] + model_s * len(item["text"]) / total_chars
        entry = {"source_id": source["source_id"], "title": source["title"], "chunks": len(item["chunks"]),
                 **counts, "seconds": round(seconds, 3)}
        report.extracted.append(entry)
        emit("source", {**entry, "status": "extracted"})


def _failure(source: dict, error: str) -> dict:
    return {"source_id": source["source_id"], "title": source["title"], "error": error}


__all__ = [
    "Chunk", "Claim", "Concept", "Contradiction", "EXTRACTOR_VERSION", "Entity", "ExtractReport",
    "ExtractionResult", "Relationship", "chunk_text", "chunk_tokens_for", "extract_pending",
    "extraction_state", "get_extraction", "local_pass", "merge_results", "pending_sources", "store_extraction",
]
