"""Contradictions across sources: candidate claim pairs, a cheap local filter, a model judge.

This module owns the `conflicts` table (m008). `find_conflicts()`:

1. candidates: every pair of claims from two DIFFERENT active sources that are
   about the same entity (the names in `claims.entities`, resolved to entity ids
   with `resolve.canonical_for`), plus pairs that share a strong subject (at least
   two rare content words) when their entities do not link them;
2. local filter: TF-IDF cosine of the two claims (over all active claims) must be
   at least `SIMILARITY_MIN`; each claim keeps at most `MAX_PARTNERS` partners
   (the most similar), so a popular entity does not cost n^2 model pairs;
   only claims not scanned before (`conflict_scans`, m012) look for partners, so
   a run's cost follows what is new, not the size of the corpus (`full=True`
   rescans everything, e.g. for lint);
3. judge: the survivors not judged before (by `pair_hash`) go to the model in
   batches of `JUDGE_BATCH` (`judge_contradiction` prompt; the offline model
   answers with rules, see kompl/offline/judge.py);
4. every judged pair is stored with its verdict, in one transaction with a
   `conflicts` audit row. A pair is never judged twice: a re-run on unchanged
   claims makes zero model calls. Batches that failed stay unjudged and are
   retried by the next run.

Readers (`list_conflicts`) see only pairs whose two sources are still active.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from kompl import db
from kompl.errors import KomplError

SIMILARITY_MIN = 0.12  # TF-IDF cosine of two claims below which they are not about the same thing
MAX_PARTNERS = 8  # most similar partners per claim that go to the judge
JUDGE_BATCH = 8  # pairs per judge call
RARE_DF = 0.02  # a word in at most this share of claims (and at most RARE_MIN_DF claims) is rare
RARE_MIN_DF = 4
SUBJECT_WORDS = 2  # rare words two claims must share to be "about the same subject"
QUOTE_CHARS = 600  # quotes sent to the judge are cut here (the claim itself never is)

VERDICTS = ("contradicts", "compatible", "unsure")

_WORD = re.compile(r"[a-z][a-z'\u2019-]+|\d+")
_STOP = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that "
    "these those he she they them his her their we our you your not no so than then there here which who whom "
    "whose what when where why how all any both each few more most other some such only own same too very can "
    "will just should would could may might must do does did has have had having about above after again "
    "against below between into through during before under over out up down off also said says one two "
    "like slide number".split()
)


class Verdict(BaseModel):
    verdict: Literal["contradicts", "compatible", "unsure"]
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


class JudgeResult(BaseModel):
    """The `judge_contradiction` contract: one verdict per pair, in the order the pairs were given."""

    verdicts: list[Verdict]
    model: str = ""  # which model judged (the offline model fills it in)


@dataclass
class ConflictReport:
    claims: int = 0
    candidates: int = 0  # cross-source pairs sharing an entity or a subject
    survivors: int = 0  # after the local similarity filter and the per-claim cap
    already_judged: int = 0
    judged: int = 0
    contradicts: int = 0
    unsure: int = 0
    model_calls: int = 0
    model: str = ""
    conflict_ids: list[int] = field(default_factory=list)  # new rows with verdict 'contradicts'
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Claim:
    id: int
    source_id: str
    source_title: str
    claim: str
    quote: str
    entities: set[str]
    words: list[str]


@dataclass
class _Pair:
    a: _Claim
    b: _Claim
    similarity: float
    entity_id: str | None
    topic: str

    @property
    def hash(self) -> str:
        return pair_hash(self.a.source_id, self.a.claim, self.b.source_id, self.b.claim)


def pair_hash(source_a: str, claim_a: str, source_b: str, claim_b: str) -> str:
    """Order-independent hash of two claims (with their sources): a judged pair's identity."""
    sides = sorted([f"{source_a}\x1f{_norm(claim_a)}", f"{source_b}\x1f{_norm(claim_b)}"])
    return hashlib.sha256("\x1e".join(sides).encode("utf-8")).hexdigest()


def _norm(text: str) -> str:
    return " ".join((text or "").split()).casefold()


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall((text or "").lower()):
        w = w.replace("\u2019", "'")
        w = w.removesuffix("'s")
        w = w.strip("'-")
        if len(w) > 2 and w not in _STOP and not w.isdigit():
            out.append(w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w)
        elif w.isdigit():
            out.append(w)
    return out


# --- reading the claims ----------------------------------------------------------------------

def _load_claims(conn: sqlite3.Connection) -> list[_Claim]:
    from kompl.pipeline.resolve import canonical_for

    rows = conn.execute(
        "SELECT c.id, c.source_id, s.title, c.claim, c.quote, c.entities FROM claims c"
        " JOIN sources s ON s.source_id = c.source_id WHERE s.status = 'active' ORDER BY c.id").fetchall()
    cache: dict[str, str | None] = {}
    claims = []
    for row in rows:
        try:
            names = [str(n) for n in json.loads(row["entities"] or "[]") if n]
        except (ValueError, TypeError):
            names = []
        ids = set()
        for name in names:
            if name not in cache:
                entity = canonical_for(conn, name)
                cache[name] = entity["entity_id"] if entity else None
            if cache[name]:
                ids.add(cache[name])
        claims.append(_Claim(row["id"], row["source_id"], row["title"] or "", row["claim"] or "", row["quote"] or "",
                             ids, _words(row["claim"])))
    return claims


def _vectors(claims: list[_Claim]) -> tuple[list[dict[str, float]], Counter]:
    """L2-normalised TF-IDF vectors of the claims, and the document frequency of each word."""
    df: Counter = Counter()
    for c in claims:
        df.update(set(c.words))
    n = len(claims)
    vectors = []
    for c in claims:
        tf = Counter(c.words)
        vec = {w: (1 + math.log(k)) * (math.log((n + 1) / (df[w] + 1)) + 1) for w, k in tf.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({w: v / norm for w, v in vec.items()})
    return vectors, df


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(k, 0.0) for k, v in a.items())


# --- candidates ---------------------------------------------------------------------------------

def candidate_pairs(conn: sqlite3.Connection, claims: list[_Claim] | None = None,
                    new_ids: set[int] | None = None) -> tuple[list[_Pair], int]:
    """(survivors of the local filter, number of candidates before it), most similar first.

    With `new_ids`, only pairs that involve one of those claims are candidates, and
    the partner cap applies to the new claims only.
    """
    claims = _load_claims(conn) if claims is None else claims
    if len(claims) < 2:
        return [], 0
    is_new = [new_ids is None or c.id in new_ids for c in claims]
    vectors, df = _vectors(claims)
    by_entity: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        for eid in c.entities:
            by_entity[eid].append(i)
    rare_limit = max(RARE_MIN_DF, int(RARE_DF * len(claims)))
    by_word: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(claims):
        for w in set(c.words):
            if 2 <= df[w] <= rare_limit and not w.isdigit() and len(w) > 3:
                by_word[w].append(i)

    names = _entity_names(conn, list(by_entity))
    # Smaller groups first: the most specific shared entity names the topic.
    found: dict[tuple[int, int], tuple[str | None, str]] = {}
    for eid in sorted(by_entity, key=lambda e: (len(by_entity[e]), e)):
        for i, j in _member_pairs(by_entity[eid], is_new):
            if claims[i].source_id != claims[j].source_id:
                found.setdefault((i, j), (eid, names.get(eid, eid)))
    shared_words: Counter = Counter()
    for w, members in by_word.items():
        for i, j in _member_pairs(members, is_new):
            if claims[i].source_id != claims[j].source_id and (i, j) not in found:
                shared_words[(i, j)] += 1
    for (i, j), count in shared_words.items():
        if count >= SUBJECT_WORDS:
            subject = sorted(set(claims[i].words) & set(claims[j].words), key=lambda w: (df[w], w))[:3]
            found[(i, j)] = (None, " ".join(subject))

    scored = []
    for (i, j), (eid, topic) in found.items():
        if _norm(claims[i].claim) == _norm(claims[j].claim):
            continue  # the same sentence twice cannot disagree with itself
        sim = _cosine(vectors[i], vectors[j])
        if sim >= SIMILARITY_MIN:
            scored.append((sim, i, j, eid, topic))
    scored.sort(key=lambda t: (-t[0], claims[t[1]].id, claims[t[2]].id))
    partners: Counter = Counter()
    pairs = []
    for sim, i, j, eid, topic in scored:
        # The cap is per new claim: an old claim may meet many new ones over time.
        capped = [k for k in (i, j) if is_new[k]]
        if any(partners[k] >= MAX_PARTNERS for k in capped):
            continue
        for k in capped:
            partners[k] += 1
        a, b = (claims[i], claims[j]) if claims[i].id < claims[j].id else (claims[j], claims[i])
        pairs.append(_Pair(a, b, round(sim, 4), eid, topic))
    return pairs, len(found)


def _member_pairs(members: list[int], is_new: list[bool]):
    """Index pairs (i < j) within a group where at least one side is new."""
    fresh = [m for m in members if is_new[m]]
    if len(fresh) == len(members):
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                yield members[x], members[y]
        return
    for i in fresh:
        for j in members:
            if j != i and (not is_new[j] or i < j):
                yield (i, j) if i < j else (j, i)


def _entity_names(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    out = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        sql = f"SELECT entity_id, canonical_name FROM entities WHERE entity_id IN ({','.join('?' * len(chunk))})"
        out.update({r[0]: r[1] for r in conn.execute(sql, chunk)})
    return out


# --- judging ------------------------------------------------------------------------------------

def find_conflicts(ws: Any, conn: sqlite3.Connection, *, gateway: Any = None, model: str | None = None,
                   on_progress: Any = None, full: bool = False) -> ConflictReport:
    """Judge every new candidate pair of claims and store the verdicts (see the module docstring).

    Only claims not scanned before look for partners, unless `full`.
    """
    from kompl.llm import LLMError, Task

    emit = on_progress or (lambda event, info: None)
    report = ConflictReport()
    claims = _load_claims(conn)
    report.claims = len(claims)
    scanned = set() if full else {r[0] for r in conn.execute("SELECT claim_id FROM conflict_scans")}
    new_ids = {c.id for c in claims if c.id not in scanned}
    if not new_ids:
        emit("start", {"total": 0})
        return report
    pairs, report.candidates = candidate_pairs(conn, claims, None if full else new_ids)
    report.survivors = len(pairs)
    known = {r[0] for r in conn.execute("SELECT pair_hash FROM conflicts")}
    todo = [p for p in pairs if p.hash not in known]
    report.already_judged = len(pairs) - len(todo)
    emit("start", {"total": len(todo)})
    if not todo:
        _mark_scanned(conn, new_ids)
        return report
    if gateway is None:
        from kompl.llm import Gateway

        gateway = Gateway(ws, conn, model=model)
    report.model = getattr(gateway, "model", "") or ""
    batches = [todo[i:i + JUDGE_BATCH] for i in range(0, len(todo), JUDGE_BATCH)]
    tasks = [Task(purpose="judge_contradiction", prompt="judge_contradiction",
                  variables={"pairs": [_pair_vars(p) for p in batch]}, schema=JudgeResult,
                  meta={"pairs": len(batch)}) for batch in batches]
    try:
        results = gateway.run_many(tasks)
    except KomplError as exc:  # e.g. a missing key: recorded; the pairs wait for the next run
        report.errors.append(str(exc))
        return report
    report.model_calls = len(tasks)
    rows = []
    now = db.utcnow()
    unjudged: set[int] = set()  # claims with a pair still waiting: scanned again next run
    for batch, result in zip(batches, results):
        if isinstance(result, (LLMError, Exception)):
            report.errors.append(str(result))
            unjudged.update(c.id for p in batch for c in (p.a, p.b))
            continue
        verdicts = list(result.verdicts)
        if len(verdicts) != len(batch):
            report.errors.append(f"the model returned {len(verdicts)} verdicts for {len(batch)} pairs; "
                                 "the pairs without one are judged again next time")
        judged_by = result.model or report.model or "unknown"
        unjudged.update(c.id for p in batch[len(verdicts):] for c in (p.a, p.b))
        for pair, verdict in zip(batch, verdicts):
            rows.append((pair, verdict, judged_by))
            emit("pair", {"verdict": verdict.verdict, "topic": pair.topic})
    if not rows:
        return report
    with db.transaction(conn) as tx:
        _mark_scanned(tx, new_ids - unjudged)
        for pair, verdict, judged_by in rows:
            cur = tx.execute(
                "INSERT OR IGNORE INTO conflicts (claim_a, claim_b, source_a, source_b, entity_id, topic, verdict,"
                " confidence, reason, model, pair_hash, judged_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (pair.a.id, pair.b.id, pair.a.source_id, pair.b.source_id, pair.entity_id, pair.topic,
                 verdict.verdict, float(verdict.confidence), verdict.reason, judged_by, pair.hash, now))
            if not cur.rowcount:
                continue
            report.judged += 1
            if verdict.verdict == "contradicts":
                report.contradicts += 1
                report.conflict_ids.append(cur.lastrowid)
            elif verdict.verdict == "unsure":
                report.unsure += 1
        if report.judged:
            db.log_activity(tx, "conflicts", actor=report.model or "kompl",
                            details={"judged": report.judged, "contradicts": report.contradicts,
                                     "unsure": report.unsure, "model_calls": report.model_calls,
                                     "conflict_ids": report.conflict_ids})
    return report


def _mark_scanned(conn: sqlite3.Connection, claim_ids: set[int]) -> None:
    now = db.utcnow()
    with db.transaction(conn):
        conn.executemany("INSERT OR IGNORE INTO conflict_scans (claim_id, scanned_at) VALUES (?, ?)",
                         [(cid, now) for cid in sorted(claim_ids)])


def _pair_vars(pair: _Pair) -> dict:
    def side(c: _Claim) -> dict:
        return {"claim": c.claim, "quote": c.quote[:QUOTE_CHARS], "source": c.source_id, "source_title": c.source_title}

    return {"a": side(pair.a), "b": side(pair.b), "topic": pair.topic}


# --- reading ------------------------------------------------------------------------------------

def list_conflicts(conn: sqlite3.Connection, *, verdict: str | None = "contradicts", entity_id: str | None = None,
                   include_inactive: bool = False) -> list[dict]:
    """Judged pairs with both claims, quotes and sources (by default: contradictions between active sources)."""
    if verdict is not None and verdict not in VERDICTS:
        raise KomplError(f"Unknown verdict {verdict!r}", hint=f"use one of {', '.join(VERDICTS)}")
    sql = ("SELECT k.id, k.entity_id, k.topic, k.verdict, k.confidence, k.reason, k.model, k.judged_at,"
           " k.source_a, sa.title AS title_a, sa.status AS status_a, ca.id AS claim_a, ca.claim AS text_a, ca.quote AS quote_a,"
           " k.source_b, sb.title AS title_b, sb.status AS status_b, cb.id AS claim_b, cb.claim AS text_b, cb.quote AS quote_b"
           " FROM conflicts k JOIN claims ca ON ca.id = k.claim_a JOIN claims cb ON cb.id = k.claim_b"
           " JOIN sources sa ON sa.source_id = k.source_a JOIN sources sb ON sb.source_id = k.source_b WHERE 1=1")
    args: list = []
    if verdict is not None:
        sql += " AND k.verdict = ?"
        args.append(verdict)
    if entity_id is not None:
        sql += " AND k.entity_id = ?"
        args.append(entity_id)
    if not include_inactive:
        sql += " AND sa.status = 'active' AND sb.status = 'active'"
    out = []
    for r in conn.execute(sql + " ORDER BY k.confidence DESC, k.id", args):
        out.append({
            "conflict_id": r["id"], "entity_id": r["entity_id"], "topic": r["topic"], "verdict": r["verdict"],
            "confidence": r["confidence"], "reason": r["reason"], "model": r["model"], "judged_at": r["judged_at"],
            "a": {"claim_id": r["claim_a"], "claim": r["text_a"], "quote": r["quote_a"], "source_id": r["source_a"],
                  "source_title": r["title_a"], "source_status": r["status_a"]},
            "b": {"claim_id": r["claim_b"], "claim": r["text_b"], "quote": r["quote_b"], "source_id": r["source_b"],
                  "source_title": r["title_b"], "source_status": r["status_b"]},
        })
    return out


def get_conflicts(conn: sqlite3.Connection, conflict_ids: list[int]) -> list[dict]:
    """The rows with these ids (any verdict, any source status), in the given order."""
    wanted = {int(i) for i in conflict_ids}
    rows = {c["conflict_id"]: c for c in list_conflicts(conn, verdict=None, include_inactive=True)
            if c["conflict_id"] in wanted}
    return [rows[i] for i in conflict_ids if int(i) in rows]


__all__ = ["ConflictReport", "JudgeResult", "Verdict", "candidate_pairs", "find_conflicts", "get_conflicts",
           "list_conflicts", "pair_hash"]
