"""Incremental cost of adding one source, and drafting concurrency.

1. Grows a generated wiki (offline model) to 10, 100 and 1,000 sources, compiling
   and approving as it goes. At each size it adds ONE new source that mentions
   popular entities (so it updates existing entity pages) and records the model
   calls and prompt tokens of that compile. Goal: flat in N — updating a page
   sends the page plus what the new source adds, never every earlier source.
2. Drafts plans through the gateway with a simulated 2 s model latency
   (litellm mock responses) and reports efficiency = ideal time / measured time,
   where ideal = latency x ceil(plans / llm_concurrency). Goal >= 0.8.

Usage:
    python bench/incremental.py [--sizes 10,100,1000] [--skip-concurrency] [--plans 16]

Generated text uses a fixed seed; KOMPL_SPACY_MODEL=rules is set unless --spacy model
is given, so the 1,000-source wiki builds in minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

FIRST = ["Ada", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kofi", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tara", "Ugo", "Vera", "Wen", "Yusuf"]
LAST = ["Moreau", "Okafor", "Lindqvist", "Tanaka", "Rossi", "Novak", "Haddad", "Keller", "Silva", "Brennan",
        "Ivanova", "Mensah", "Larsen", "Duarte", "Weber", "Kowalski", "Nakamura", "Ferreira", "Byrne", "Sato"]
ORGS = ["Northwind Labs", "Helios Energy", "Bluefin Analytics", "Cobalt Systems", "Aurora Health",
        "Granite Capital", "Meridian Foods", "Vantage Robotics", "Pioneer Maritime", "Summit Pharma",
        "Orbital Works", "Keystone Bank", "Redwood Media", "Atlas Logistics", "Harbor Institute"]
VERBS = ["announced a partnership with", "hired a team from", "criticised", "signed a contract with",
         "published a report about", "invested in", "met representatives of", "praised the work of"]
TOPICS = ["battery recycling", "river restoration", "grid storage", "vaccine logistics", "coastal mapping",
          "soil sensors", "water pricing", "urban cooling", "rail freight", "seed banks"]


def make_people(rng: random.Random, n: int) -> list[str]:
    people = {f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(n * 3)}
    return sorted(people)[:n]


def make_doc(rng: random.Random, i: int, people: list[str], popular: list[str] | None = None) -> str:
    cast = rng.sample(people, 3) if popular is None else popular
    org = rng.choice(ORGS)
    topic = rng.choice(TOPICS)
    lines = [f"# Report {i}: {topic.title()} at {org}", ""]
    for n in range(6):
        a, b = rng.choice(cast), rng.choice(ORGS)
        lines.append(f"In {2000 + (i + n) % 24}, {a} {rng.choice(VERBS)} {b} on {topic}. "
                     f"{a} said the {topic} programme at {b} would cost {rng.randint(2, 90)} million dollars.")
    lines.append(f"{cast[0]} and {cast[1]} worked together at {org} for {rng.randint(2, 15)} years.")
    return "\n".join(lines) + "\n"


def add_docs(ws, conn, docs: list[tuple[str, str]]) -> None:
    from kompl.ingest import Input, ingest

    ingest(ws, conn, [Input("stdin", "-", data=text.encode(), title=title) for title, text in docs])


def compile_and_approve(ws, conn) -> dict:
    from kompl.pipeline.compile import compile_workspace

    before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM llm_calls").fetchone()[0]
    report = compile_workspace(ws, conn)
    calls, prompt_tokens = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0) FROM llm_calls WHERE id > ?", (before,)).fetchone()
    by_purpose = dict(conn.execute(
        "SELECT purpose, SUM(prompt_tokens) FROM llm_calls WHERE id > ? GROUP BY purpose", (before,)).fetchall())
    biggest = conn.execute(
        "SELECT json_extract(meta, '$.page_key'), prompt_tokens FROM llm_calls WHERE id > ? AND purpose = 'draft'"
        " ORDER BY prompt_tokens DESC LIMIT 3", (before,)).fetchall()
    return {"calls": calls, "prompt_tokens": prompt_tokens, "plans": report.plans, "by_purpose": by_purpose,
            "seconds": report.seconds, "biggest": biggest}


def incremental(sizes: list[int]) -> list[dict]:
    from kompl import db
    from kompl.workspace import init_workspace

    rng = random.Random(7)
    people = make_people(rng, 60)
    popular = people[:3]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ws, _ = init_workspace(Path(tmp) / "wiki")
        ws.settings.auto_approve = True
        conn = db.connect(ws.db_path)
        count = 0
        for size in sizes:
            started = time.perf_counter()
            while count < size:
                batch = min(50, size - count)
                docs = []
                for _ in range(batch):
                    # Every tenth document features the popular people, so their pages have many sources.
                    cast = popular if count % 10 == 0 else None
                    docs.append((f"Report {count}", make_doc(rng, count, people, cast)))
                    count += 1
                add_docs(ws, conn, docs)
                compile_and_approve(ws, conn)
            grow_s = time.perf_counter() - started
            page_sources = conn.execute(
                "SELECT MAX(n) FROM (SELECT COUNT(*) n FROM page_sources GROUP BY page_id)").fetchone()[0]
            add_docs(ws, conn, [(f"New report at {size}", make_doc(rng, 10_000 + size, people, popular))])
            one = compile_and_approve(ws, conn)
            count += 1
            rows.append({"size": size, "grow_s": grow_s, "max_sources_per_page": page_sources, **one})
            print(f"  size {size:>5}: one new source -> {one['calls']} calls, {one['prompt_tokens']:,} prompt tokens "
                  f"({one['plans']} plans; biggest page had {page_sources} sources; growing took {grow_s:.0f} s)",
                  flush=True)
            print("    largest drafting prompts: " + ", ".join(f"{k} {t:,}" for k, t in one["biggest"]), flush=True)
        conn.close()
    return rows


def concurrency(plans_wanted: int, latency_s: float = 2.0) -> dict:
    """Draft `plans_wanted` plans through a real-model gateway whose replies take `latency_s`."""
    import json
    import math

    from kompl import db
    from kompl.demo import example_dir
    from kompl.ingest import expand, ingest
    from kompl.llm import Gateway
    from kompl.pipeline import conflicts, draft, plan, resolve
    from kompl.pipeline.extract import extract_pending
    from kompl.workspace import init_workspace

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-key")
    with tempfile.TemporaryDirectory() as tmp:
        ws, _ = init_workspace(Path(tmp) / "wiki")
        conn = db.connect(ws.db_path)
        items, report = expand([str(example_dir())])
        ingest(ws, conn, items, report=report)
        extract_pending(ws, conn)
        resolve.resolve(ws, conn)
        conflicts.find_conflicts(ws, conn)
        plan.plan_pending(ws, conn)
        ids = [r[0] for r in conn.execute(
            "SELECT plan_id FROM page_plans WHERE status='planned' AND page_type != 'original-source' ORDER BY plan_id")]
        ids = ids[:plans_wanted]
        gw = Gateway(ws, conn, model="openai/gpt-4o-mini")
        reply = json.dumps({"title": "x", "summary": "A simulated draft.", "category": "other",
                            "body": "A simulated draft body."})
        gw.completion_kwargs = {"mock_response": reply, "mock_delay": latency_s}
        gw.check()  # imports litellm (3-4 s) before the clock starts: we time drafting, not the import
        started = time.perf_counter()
        result = draft.draft_pending(ws, conn, gateway=gw, plan_ids=ids)
        measured = time.perf_counter() - started
        limit = ws.settings.llm_concurrency
        ideal = latency_s * math.ceil(len(ids) / limit)
        outcomes = dict(conn.execute(
            "SELECT outcome, COUNT(*) FROM llm_calls WHERE model != 'kompl/offline' GROUP BY outcome").fetchall())
        conn.close()
    return {"plans": len(ids), "drafted": len(result.drafted) + len(result.noop), "limit": limit, "outcomes": outcomes,
            "latency_s": latency_s, "ideal_s": ideal, "measured_s": measured, "efficiency": ideal / measured}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--plans", type=int, default=16, help="plans drafted in the concurrency run")
    parser.add_argument("--spacy", default="rules", help="'rules' (fast, default) or 'model' (installed spaCy model)")
    parser.add_argument("--skip-incremental", action="store_true")
    parser.add_argument("--skip-concurrency", action="store_true")
    args = parser.parse_args()
    if args.spacy == "rules":
        os.environ["KOMPL_SPACY_MODEL"] = "rules"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    if not args.skip_incremental:
        sizes = [int(s) for s in args.sizes.split(",")]
        print(f"Incremental cost of one new source (offline model, spaCy: {args.spacy})", flush=True)
        rows = incremental(sizes)
        print()
        print(f"{'wiki size':>10} {'calls':>6} {'prompt tokens':>14} {'plans':>6}  prompt tokens by purpose")
        for r in rows:
            purposes = ", ".join(f"{k} {v:,}" for k, v in sorted(r["by_purpose"].items()))
            print(f"{r['size']:>10} {r['calls']:>6} {r['prompt_tokens']:>14,} {r['plans']:>6}  {purposes}")
        first, last = rows[0]["prompt_tokens"], rows[-1]["prompt_tokens"]
        print(f"growth of prompt tokens from {rows[0]['size']} to {rows[-1]['size']} sources: x{last / max(first, 1):.2f}")
    if not args.skip_concurrency:
        print("\nDrafting concurrency (simulated 2 s model latency, litellm mock responses)", flush=True)
        c = concurrency(args.plans)
        print(f"  {c['plans']} plans, limit {c['limit']}: ideal {c['ideal_s']:.1f} s, measured {c['measured_s']:.1f} s, "
              f"efficiency {c['efficiency']:.2f} (goal >= 0.8); drafted {c['drafted']}; call outcomes {c['outcomes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
