"""Benchmark: retrieval quality of `kompl search` on an evaluation set, and search latency at 10,000 pages.

    .venv/bin/python bench/retrieval.py [--set ../shared/evals/dev] [--pages 10000]
                                        [--skip-quality] [--skip-latency] [--json out.json]

Quality. The set's `docs/` are ingested into a temporary workspace, compiled
with the offline model and every draft approved (the documents are read where
they are, never copied into the repository). Each question of
`questions.jsonl` with at least one evidence document is then searched in the
three modes of `kompl.read.search.search` (hybrid, fts, vector; limit 10) and
scored against its `evidence_docs`; a plain Okapi BM25 over the raw document
files is the baseline. HIT_DEFINITION (printed with the table) says what
counts as finding a document.

Latency. A second temporary workspace gets `--pages` generated pages,
committed with `kompl.wiki.store.commit_version` (pre-rendered text, over a few
generated sources) and embedded with `kompl.vectors.sync_pages` in batches.
Each query (the set's questions when there is a set, plus short generated
ones) is then searched in each mode through one long-lived `VectorIndex`, as
`kompl chat` and `kompl mcp` do, after one warm-up query; p50 and p95 of the
wall time of `search()` are reported. Goals: hybrid beats BM25 on recall@5 and
MRR; hybrid p50 < 50 ms at 10,000 pages.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB_FILE = "kompl.db"
DEFAULT_SET = ROOT.parent / "shared" / "evals" / "dev"
MODES = ("hybrid", "fts", "vector")
KS = (5, 10)
HIT_DEFINITION = (
    "A question's evidence documents are the files named in evidence_docs (questions without any are skipped).\n"
    "An evidence document d is FOUND by a wiki result page P when P has d's source in its provenance\n"
    "(page_sources): the source page of d, or any entity/concept/comparison page citing d.\n"
    "recall@k = |evidence docs found by the top k results| / |evidence docs|, averaged over questions.\n"
    "MRR = mean over questions of 1/rank of the first result that finds any evidence document (0 if none in the top 10).\n"
    "BM25 baseline: Okapi BM25 (k1=1.2, b=0.75; lower-cased words, stop words removed) over the raw document files;\n"
    "a result finds d when it is d itself.\n"
    "strict recall@5 counts only source pages (page_type 'source'), one per document, like the baseline."
)


# --- a plain BM25 over raw documents --------------------------------------------------------------

class BM25:
    """Okapi BM25 over already tokenised documents."""

    def __init__(self, docs: Sequence[list[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(d) for d in docs]
        self.lengths = [len(d) for d in docs]
        self.avg = sum(self.lengths) / max(1, len(docs))
        df = Counter(t for tf in self.tf for t in tf)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def rank(self, query: list[str]) -> list[int]:
        scores = []
        for i, tf in enumerate(self.tf):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            s = sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in query if t in tf)
            scores.append((s, i))
        return [i for s, i in sorted(scores, key=lambda x: (-x[0], x[1])) if s > 0]


def bm25_tokens(text: str) -> list[str]:
    from kompl.read.search import STOPWORDS

    return [t for t in (w.lower() for w in re.findall(r"\w+", text)) if t not in STOPWORDS]


# --- scoring ----------------------------------------------------------------------------------------

def score(ranked: list[set[str]], evidence: set[str]) -> dict[str, float]:
    """`ranked`: for each result, best first, the evidence-doc names it finds."""
    out: dict[str, float] = {}
    for k in KS:
        found = set().union(*ranked[:k]) & evidence if ranked else set()
        out[f"r@{k}"] = len(found) / len(evidence)
    first = next((i for i, docs in enumerate(ranked[:10], 1) if docs & evidence), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def mean_scores(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.fmean(r[key] for r in rows) for key in rows[0]} if rows else {}


# --- quality ----------------------------------------------------------------------------------------

def load_questions(eval_set: Path) -> list[dict]:
    with open(eval_set / "questions.jsonl", encoding="utf-8") as fh:
        return [q for q in (json.loads(line) for line in fh if line.strip())]


def build_eval_workspace(eval_set: Path, home: Path, say: Callable[[str], None]):
    from kompl import db, review, vectors
    from kompl.ingest import expand, ingest
    from kompl.pipeline.compile import compile_workspace
    from kompl.workspace import OFFLINE_MODEL, init_workspace

    ws, _ = init_workspace(home)
    conn = db.connect(ws.db_path)
    t0 = time.perf_counter()
    inputs, report = expand([str(eval_set / "docs")], exclude=ws.data)
    report = ingest(ws, conn, inputs, report=report)
    if report.failed:
        say(f"  ingest failures: {report.failed}")
    say(f"  ingested {len(report.ingested)} documents in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    compiled = compile_workspace(ws, conn, model=OFFLINE_MODEL)
    say(f"  compiled ({compiled.plans} plans, {compiled.drafted} drafts, {len(compiled.failed)} failures)"
        f" in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    approved = review.approve(ws, conn, review.ALL)
    fixed = vectors.reconcile(ws, conn, fix=True)
    say(f"  approved {len(approved.approved)} drafts ({len(approved.failed)} failed), vectors reconciled"
        f" (+{fixed['embedded_pages']} pages) in {time.perf_counter() - t0:.1f}s")
    return ws, conn


def page_docs(conn) -> tuple[dict[int, set[str]], dict[int, set[str]]]:
    """page_id -> evidence-doc file names it cites (any page), and the same for source pages only."""
    doc_of = {r[0]: Path(r[1]).name for r in conn.execute("SELECT source_id, input FROM sources")}
    cites: dict[int, set[str]] = {}
    strict: dict[int, set[str]] = {}
    for page_id, source_id, page_type in conn.execute(
            "SELECT ps.page_id, ps.source_id, p.page_type FROM page_sources ps JOIN pages p USING (page_id)"):
        name = doc_of.get(source_id)
        if name:
            cites.setdefault(page_id, set()).add(name)
            if page_type == "source":
                strict.setdefault(page_id, set()).add(name)
    return cites, strict


def run_quality(eval_set: Path, say: Callable[[str], None], keep: Path | None = None) -> dict:
    from kompl.read.search import search
    from kompl.vectors import VectorIndex

    questions = [q for q in load_questions(eval_set) if q.get("evidence_docs")]
    skipped = len(load_questions(eval_set)) - len(questions)
    home = (keep.resolve() / "quality") if keep else Path(tempfile.mkdtemp(prefix="kompl-retrieval-"))
    try:
        say(f"quality: {len(questions)} questions with evidence ({skipped} without, skipped); workspace {home}")
        if keep and (home / "wiki" / "data" / DB_FILE).exists():
            from kompl import db
            from kompl.workspace import find_workspace

            ws = find_workspace(home / "wiki")
            conn = db.connect(ws.db_path)
            say("  reusing the compiled workspace")
        else:
            ws, conn = build_eval_workspace(eval_set, home / "wiki", say)
        cites, strict = page_docs(conn)
        pages = conn.execute("SELECT page_type, COUNT(*) FROM pages WHERE status='active' GROUP BY page_type").fetchall()
        say("  pages: " + ", ".join(f"{n} {t}" for t, n in pages))
        index = VectorIndex(ws)
        rows: dict[str, list[dict]] = {m: [] for m in MODES}
        strict_rows: dict[str, list[dict]] = {m: [] for m in MODES}
        per_question: list[dict] = []
        for q in questions:
            evidence = set(q["evidence_docs"])
            entry = {"id": q.get("id"), "evidence": sorted(evidence)}
            for mode in MODES:
                found = search(ws, conn, q["question"], limit=10, mode=mode, vector_index=index)
                ids = [h.page_id for h in found.hits]
                rows[mode].append(score([cites.get(pid, set()) for pid in ids], evidence))
                strict_rows[mode].append(score([strict.get(pid, set()) for pid in ids], evidence))
                entry[mode] = rows[mode][-1]
            per_question.append(entry)
        conn.close()
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)

    files = sorted((eval_set / "docs").glob("*"))
    names = [p.name for p in files if p.is_file()]
    bm25 = BM25([bm25_tokens(p.read_text(encoding="utf-8", errors="replace")) for p in files if p.is_file()])
    base = []
    for q in questions:
        ranked = bm25.rank(bm25_tokens(q["question"]))[:10]
        base.append(score([{names[i]} for i in ranked], set(q["evidence_docs"])))
        next(e for e in per_question if e["id"] == q.get("id"))["bm25"] = base[-1]
    table = {mode: {**mean_scores(rows[mode]), "strict_r@5": mean_scores(strict_rows[mode])["r@5"]} for mode in MODES}
    table["bm25 (raw docs)"] = {**mean_scores(base), "strict_r@5": mean_scores(base)["r@5"]}
    return {"questions": len(questions), "skipped_without_evidence": skipped, "table": table,
            "per_question": per_question}


# --- latency ----------------------------------------------------------------------------------------

_FALLBACK_WORDS = [
    "market", "court", "trial", "crypto", "exchange", "founder", "verdict", "league", "season",
    "coach", "injury", "album", "tour", "stadium", "rate", "inflation", "bank", "housing", "price",
    "startup", "model", "chip", "launch", "funding", "investor", "lawsuit", "regulator",
    "streaming", "studio", "release", "quarterback", "playoff"
]


def vocabulary(eval_set: Path | None) -> list[str]:
    """Words in order of frequency: those of the set's documents, or a small built-in list."""
    from kompl.read.search import STOPWORDS

    counts: Counter = Counter()
    if eval_set is not None and (eval_set / "docs").is_dir():
        for path in sorted((eval_set / "docs").glob("*")):
            counts.update(w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", path.read_text(encoding="utf-8", errors="replace"))
                          if w.lower() not in STOPWORDS and len(w) > 2)
    return [w for w, _ in counts.most_common()] or list(_FALLBACK_WORDS)


def generated_page(rng: random.Random, words: list[str], cum_weights: list[float], i: int) -> tuple[str, str]:
    """(title, body) of one generated page: a Zipf-distributed word salad in a few paragraphs."""
    title = " ".join(w.capitalize() for w in rng.choices(words[:3000], k=rng.randint(1, 3))) + f" {i}"
    paras = []
    for _ in range(rng.randint(2, 5)):
        sentences = [" ".join(rng.choices(words, cum_weights=cum_weights, k=rng.randint(8, 20))).capitalize() + "."
                     for _ in range(rng.randint(2, 5))]
        paras.append(" ".join(sentences))
    return title, f"# {title}\n\n" + "\n\n".join(paras) + "\n"


def build_latency_workspace(home: Path, n_pages: int, eval_set: Path | None, say: Callable[[str], None],
                            seed: int = 11):
    from kompl import db, vectors
    from kompl.ingest import Input, ingest
    from kompl.wiki import markdown as md
    from kompl.wiki import store
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(home)
    conn = db.connect(ws.db_path)
    rng = random.Random(seed)
    words = vocabulary(eval_set)
    cum_weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(words))))
    srcs = [Input("stdin", "-", data=f"# Generated source {n}\n\n{' '.join(rng.choices(words, k=200))}\n".encode(),
                  title=f"Generated source {n}") for n in range(5)]
    report = ingest(ws, conn, srcs)
    source_ids = [s["source_id"] for s in report.ingested]
    t0 = time.perf_counter()
    ids = []
    kinds = ("entity", "concept", "source", "comparison")
    with _generation_fast_path(store):
        for i in range(n_pages):
            title, body = generated_page(rng, words, cum_weights, i)
            page_type = kinds[i % len(kinds)]
            sources = [(s, "mention") for s in rng.sample(source_ids, rng.randint(1, 2))]
            meta = {"title": title, "page_type": page_type, "category": "other", "summary": "",
                    "sources": sorted(s for s, _ in sources), "model": "bench", "updated": db.utcnow()}
            write = store.PageWrite(page_key=f"{page_type}:bench-{i}", page_type=page_type, title=title, body=body,
                                    sources=sources, author="bench")
            row, _ = store.commit_version(ws, conn, write, text=md.render_page(meta, body))
            ids.append(row["page_id"])
            if (i + 1) % 1000 == 0:
                say(f"  committed {i + 1} pages ({time.perf_counter() - t0:.0f}s)")
    say(f"  committed {n_pages} pages in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    chunks = 0
    for start in range(0, len(ids), 1000):
        done = vectors.sync_pages(ws, conn, ids[start:start + 1000])
        chunks += done["embedded_chunks"]
    say(f"  embedded {chunks} chunks in {time.perf_counter() - t0:.1f}s")
    return ws, conn, words


@contextlib.contextmanager
def _generation_fast_path(store):
    """Two shortcuts while the throw-away latency wiki is written (searching it is what is measured).

    The text is pre-rendered (`text=`), so the link targets `commit_version` looks up
    on every call (a scan of all pages: quadratic over 10,000 commits) go unused; and
    the page files need not survive a crash, so their fsyncs are skipped.
    """
    with mock.patch.object(store, "link_targets", lambda conn: {}), mock.patch("os.fsync", lambda fd: None):
        yield


def latency_queries(eval_set: Path | None, words: list[str], n_short: int = 100, seed: int = 5) -> list[tuple[str, str]]:
    """(kind, query): the set's questions ("long", ~20-60 words) and generated 1-4 word queries ("short")."""
    rng = random.Random(seed)
    queries = [("long", q["question"]) for q in load_questions(eval_set)] if eval_set and (eval_set / "questions.jsonl").exists() else []
    queries += [("short", " ".join(rng.choices(words[:5000], k=rng.randint(1, 4)))) for _ in range(n_short)]
    return queries


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    pos = (len(values) - 1) * p / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def run_latency(n_pages: int, eval_set: Path | None, say: Callable[[str], None], keep: Path | None = None) -> dict:
    from kompl.read.search import search
    from kompl.vectors import VectorIndex

    home = (keep.resolve() / f"latency-{n_pages}") if keep else Path(tempfile.mkdtemp(prefix="kompl-latency-"))
    try:
        if keep and (home / "wiki" / "data" / DB_FILE).exists():
            from kompl import db
            from kompl.workspace import find_workspace

            say(f"latency: reusing the wiki of {n_pages} pages in {home}")
            ws = find_workspace(home / "wiki")
            conn, words = db.connect(ws.db_path), vocabulary(eval_set)
        else:
            say(f"latency: generating a wiki of {n_pages} pages in {home}")
            ws, conn, words = build_latency_workspace(home / "wiki", n_pages, eval_set, say)
        queries = latency_queries(eval_set, words)
        index = VectorIndex(ws)
        out = {}
        for mode in MODES:
            t0 = time.perf_counter()
            search(ws, conn, "warm up query", limit=10, mode=mode, vector_index=index)
            first = (time.perf_counter() - t0) * 1000
            times: dict[str, list[float]] = {"long": [], "short": []}
            cpu = []
            for kind, q in queries:
                t0, c0 = time.perf_counter(), time.process_time()
                search(ws, conn, q, limit=10, mode=mode, vector_index=index)
                times[kind].append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
            every = times["long"] + times["short"]
            out[mode] = {"p50_ms": percentile(every, 50), "p95_ms": percentile(every, 95), "first_ms": first,
                         "cpu_p50_ms": percentile(cpu, 50), "queries": len(every),
                         **{f"{kind}_p50_ms": percentile(t, 50) for kind, t in times.items() if t},
                         **{f"{kind}_p95_ms": percentile(t, 95) for kind, t in times.items() if t}}
        pages = conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
        conn.close()
        return {"pages": pages, "modes": out}
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)


# --- output -----------------------------------------------------------------------------------------

def print_quality(result: dict) -> None:
    print()
    print(HIT_DEFINITION)
    print()
    print(f"Retrieval quality over {result['questions']} questions ({result['skipped_without_evidence']} without evidence skipped)")
    print(f"{'mode':<18}{'recall@5':>10}{'recall@10':>11}{'MRR':>8}{'strict r@5':>12}")
    for mode, row in result["table"].items():
        print(f"{mode:<18}{row['r@5']:>10.3f}{row['r@10']:>11.3f}{row['mrr']:>8.3f}{row['strict_r@5']:>12.3f}")
    hyb, base = result["table"]["hybrid"], result["table"]["bm25 (raw docs)"]
    ok = hyb["r@5"] > base["r@5"] and hyb["mrr"] > base["mrr"]
    print(f"goal (hybrid beats BM25 on recall@5 and MRR): {'met' if ok else 'NOT met'}")


def print_latency(result: dict) -> None:
    print()
    print(f"Search latency at {result['pages']} pages (one long-lived VectorIndex, limit 10,"
          f" {next(iter(result['modes'].values()))['queries']} queries: the set's questions and 1-4 word ones)")
    print(f"{'mode':<10}{'p50 ms':>9}{'p95 ms':>9}{'cpu p50':>9}{'long p50/p95':>15}{'short p50/p95':>15}{'first ms':>10}")
    for mode, row in result["modes"].items():
        split = [f"{row[f'{k}_p50_ms']:.1f}/{row[f'{k}_p95_ms']:.1f}" if f"{k}_p50_ms" in row else "-"
                 for k in ("long", "short")]
        print(f"{mode:<10}{row['p50_ms']:>9.1f}{row['p95_ms']:>9.1f}{row['cpu_p50_ms']:>9.1f}{split[0]:>15}{split[1]:>15}"
              f"{row['first_ms']:>10.1f}")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores while measuring)")
    p50 = result["modes"]["hybrid"]["p50_ms"]
    print(f"goal (hybrid p50 < 50 ms): {'met' if p50 < 50 else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", dest="eval_set", type=Path, default=DEFAULT_SET,
                        help="evaluation folder with docs/ and questions.jsonl (default: ../shared/evals/dev)")
    parser.add_argument("--pages", type=int, default=10_000, help="pages in the latency wiki (default 10000)")
    parser.add_argument("--skip-quality", action="store_true", help="do not measure retrieval quality")
    parser.add_argument("--skip-latency", action="store_true", help="do not measure search latency")
    parser.add_argument("--json", type=Path, help="also write the results (per question too) here")
    parser.add_argument("--workspace", type=Path,
                        help="build the workspaces here and keep them (quality/, latency-N/); reused when they"
                             " exist (default: temporary folders, removed)")
    args = parser.parse_args(argv)

    for key in list(os.environ):
        if key.startswith("KOMPL_") and key != "KOMPL_EMBEDDER":
            os.environ.pop(key)  # the offline model and default settings, whatever the shell says
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    eval_set = args.eval_set.resolve()
    has_set = (eval_set / "docs").is_dir() and (eval_set / "questions.jsonl").exists()
    results: dict = {"set": str(eval_set)}
    if not args.skip_quality:
        if not has_set:
            say(f"no evaluation set at {eval_set} (docs/ and questions.jsonl): give one with --set")
            return 2
        results["quality"] = run_quality(eval_set, say, keep=args.workspace)
        print_quality(results["quality"])
    if not args.skip_latency:
        results["latency"] = run_latency(args.pages, eval_set if has_set else None, say, keep=args.workspace)
        print_latency(results["latency"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
