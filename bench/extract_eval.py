"""Entity recall and extraction time of `kompl extract` on an evaluation set.

Usage:
    .venv/bin/python bench/extract_eval.py ../shared/evals/dev [--home /tmp/kompl-eval] [--model kompl/offline] [--json out.json]

Ingests EVAL/docs into a fresh workspace (the documents are read from there,
never copied into the repository), extracts every source and scores the
entities of EVAL/entities.jsonl: an (entity, doc) pair counts as found when a
mention of that doc (entity or concept) has the normalised name of the entity
or of one of its aliases. Reports per-doc and overall recall, per-entity
recall, and the extraction time per source.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evals", type=Path, help="evaluation folder holding docs/ and entities.jsonl")
    parser.add_argument("--home", type=Path, help="workspace to create (default: a temporary folder)")
    parser.add_argument("--model", default=None, help="model for the model pass (default: the workspace's)")
    parser.add_argument("--json", type=Path, help="also write the full results here")
    args = parser.parse_args(argv)

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    home = args.home or Path(tempfile.mkdtemp(prefix="kompl-eval-"))
    if home.exists():
        shutil.rmtree(home)
    kompl = [sys.executable, "-m", "kompl", "--home", str(home)]
    subprocess.run(kompl + ["init", str(home)], check=True, capture_output=True)
    t0 = time.perf_counter()
    done = subprocess.run(kompl + ["ingest", str(args.evals / "docs"), "--json"], capture_output=True, text=True)
    ingest_s = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        print(done.stderr, file=sys.stderr)
        return 2

    from kompl import db, nlp
    from kompl.ingest import store
    from kompl.pipeline.extract import extract_pending
    from kompl.text import norm_name
    from kompl.workspace import find_workspace

    ws = find_workspace(home)
    conn = db.connect(ws.db_path)
    t_load = time.perf_counter()
    nlp.load_pipeline()
    load_s = time.perf_counter() - t_load
    report = extract_pending(ws, conn, model=args.model)
    if report.failed:
        print(f"{len(report.failed)} source(s) failed: {report.failed[:3]}", file=sys.stderr)

    doc_of = {s["source_id"]: Path(s["input"]).name for s in store.list_sources(conn)}
    source_of = {name: sid for sid, name in doc_of.items()}
    mentions: dict[str, set[str]] = {}
    entity_only: dict[str, set[str]] = {}
    for sid, norm, kind in conn.execute("SELECT source_id, norm, kind FROM entity_mentions"):
        mentions.setdefault(doc_of[sid], set()).add(norm)
        if kind == "entity":
            entity_only.setdefault(doc_of[sid], set()).add(norm)

    gold = [json.loads(line) for line in (args.evals / "entities.jsonl").read_text().splitlines() if line.strip()]
    per_doc: dict[str, list[int]] = {}
    per_entity = {}
    found = found_entity_kind = total = 0
    for item in gold:
        names = {norm_name(n) for n in [item["entity"], *item.get("aliases", [])]}
        hits = 0
        for doc in item["docs"]:
            if doc not in source_of:
                continue
            total += 1
            ok = bool(names & mentions.get(doc, set()))
            found_entity_kind += bool(names & entity_only.get(doc, set()))
            hits += ok
            found += ok
            slot = per_doc.setdefault(doc, [0, 0])
            slot[0] += ok
            slot[1] += 1
        per_entity[item["entity"]] = {"found": hits, "docs": len(item["docs"])}

    seconds = [e["seconds"] for e in report.extracted]
    doc_recalls = {doc: f / n for doc, (f, n) in per_doc.items()}
    result = {
        "model": report.model, "pipeline": report.pipeline, "sources": len(doc_of),
        "extracted": len(report.extracted), "failed": len(report.failed),
        "recall": round(found / total, 4) if total else None,
        "recall_entity_kind_only": round(found_entity_kind / total, 4) if total else None,
        "pairs_found": found, "pairs": total,
        "mean_doc_recall": round(statistics.mean(doc_recalls.values()), 4) if doc_recalls else None,
        "per_doc": {d: {"found": f, "expected": n} for d, (f, n) in sorted(per_doc.items())},
        "per_entity": per_entity,
        "seconds": {
            "spacy_load": round(load_s, 2), "ingest_total": round(ingest_s, 2),
            "extract_total": round(report.seconds, 2),
            "per_source_mean": round(statistics.mean(seconds), 3) if seconds else None,
            "per_source_median": round(statistics.median(seconds), 3) if seconds else None,
            "per_source_max": round(max(seconds), 3) if seconds else None,
        },
        "stored": {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in ("entity_mentions", "claims", "relationship_mentions")},
        "home": str(home),
    }
    conn.close()

    print(f"model {result['model']} ({result['pipeline'].get('name')} {result['pipeline'].get('version')}), "
          f"{result['extracted']}/{result['sources']} sources extracted, {result['failed']} failed")
    print(f"entity recall: {found}/{total} = {result['recall']:.3f} (entity mentions only: "
          f"{result['recall_entity_kind_only']:.3f}); mean per-doc recall {result['mean_doc_recall']:.3f}")
    print("per doc:")
    for doc, (f, n) in sorted(per_doc.items()):
        print(f"  {f}/{n}  {doc}")
    print("missed entities:")
    for name, info in per_entity.items():
        if info["found"] < info["docs"]:
            print(f"  {info['found']}/{info['docs']}  {name}")
    s = result["seconds"]
    print(f"time: spaCy load {s['spacy_load']} s, extraction {s['extract_total']} s in all, per source mean "
          f"{s['per_source_mean']} s, median {s['per_source_median']} s, max {s['per_source_max']} s")
    print(f"stored: {result['stored']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
