"""Benchmark: `kompl ingest` of a generated mixed corpus against bare markitdown, and CLI cold start.

Generates >= 200 documents (md, txt, html, docx, xlsx, pptx, pdf, csv, json) in a
temporary folder, then in the same process and run times

  * bare: `MarkItDown(enable_plugins=False).convert(path)` for every file, and
  * kompl: the ingest service (`kompl.ingest.expand` + `ingest`, the code behind
    `kompl ingest FOLDER`, run in-process) into a fresh workspace: conversion plus
    checks, normalization, hashing, gzip, atomic writes and one SQLite commit per source,

each `--rounds` times alternately (best round counts; markitdown is imported before
either clock starts), and prints both times and the ratio (goal <= 1.3x). It
then times `python -m kompl --help` in a subprocess, best of 5 (goal < 0.3 s).

    .venv/bin/python bench/ingest.py [--docs 216] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fixtures_docs import docx_bytes, pdf_bytes, pptx_bytes, token, xlsx_bytes  # noqa: E402

WORDS = ("penicillin mould culture Fleming Florey Chain Heatley Oxford laboratory strain yield deep tank "
         "fermentation trial patient dose war production Nobel credit discovery accident window myth").split()
KINDS = ("md", "txt", "html", "docx", "xlsx", "pptx", "pdf", "csv", "json")


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def paragraphs(rng: random.Random, count: int) -> list[str]:
    return [" ".join(sentence(rng) for _ in range(rng.randint(3, 7))) for _ in range(count)]


def make_corpus(folder: Path, total: int, seed: int = 7) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for i in range(total):
        kind = KINDS[i % len(KINDS)]
        paras = paragraphs(rng, rng.randint(4, 16)) + [f"Unique marker {token()}."]
        path = folder / f"doc{i:03d}.{kind}"
        if kind == "md":
            data = f"# Note {i}\n\n" + "\n\n".join(paras) + "\n"
        elif kind == "txt":
            data = "\n\n".join(paras) + "\n"
        elif kind == "html":
            body = "".join(f"<p>{p}</p>" for p in paras)
            data = f"<html><head><title>Page {i}</title><script>var x={i};</script></head><body><h1>Page {i}</h1>{body}</body></html>"
        elif kind == "docx":
            data = docx_bytes(paras, heading=f"Report {i}")
        elif kind == "xlsx":
            data = xlsx_bytes([["year", "yield", "note"]] + [[1940 + r, rng.randint(1, 999), sentence(rng, 5)] for r in range(30)]
                              + [[0, 0, paras[-1]]])
        elif kind == "pptx":
            data = pptx_bytes(f"Deck {i}", "\n".join(p[:200] for p in paras))
        elif kind == "pdf":
            lines = [chunk for p in paras for chunk in (p[j:j + 90] for j in range(0, len(p), 90))]
            data = pdf_bytes(lines[:50] + [paras[-1]])
        elif kind == "csv":
            data = "year,yield,note\n" + "".join(f"{1940 + r},{rng.randint(1, 999)},{sentence(rng, 5)}\n" for r in range(40)) + f"0,0,{paras[-1]}\n"
        else:
            import json

            data = json.dumps({"id": i, "paragraphs": paras}, indent=2)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        paths.append(path)
    return paths


def time_bare(paths: list[Path]) -> float:
    from markitdown import MarkItDown

    started = time.perf_counter()
    md = MarkItDown(enable_plugins=False)
    for path in paths:
        md.convert(str(path))
    return time.perf_counter() - started


def time_kompl(folder: Path, home: Path, expected: int) -> float:
    from kompl import db
    from kompl.ingest import expand, ingest
    from kompl.workspace import init_workspace

    shutil.rmtree(home, ignore_errors=True)
    ws, _ = init_workspace(home)
    conn = db.connect(ws.db_path)
    try:
        started = time.perf_counter()
        items, report = expand([str(folder)])
        report = ingest(ws, conn, items, report=report)
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    if report.failed or len(report.ingested) != expected:
        raise SystemExit(f"kompl ingest did not store every document: {report.failed[:3]}")
    return elapsed


def cold_start(runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kompl", "--help"], check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=216, help="corpus size (>= 200)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kompl-bench-") as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        paths = make_corpus(corpus, args.docs)
        size = sum(p.stat().st_size for p in paths)
        print(f"corpus: {len(paths)} documents ({', '.join(KINDS)}), {size / 1e6:.1f} MB")
        import markitdown  # noqa: F401  (import cost is paid before either clock starts)

        bare, komp = [], []
        for _ in range(args.rounds):
            bare.append(time_bare(paths))
            komp.append(time_kompl(corpus, Path(tmp) / "wiki", len(paths)))
        b, k = min(bare), min(komp)
        print(f"bare markitdown convert : {b:6.2f} s  (rounds: {', '.join(f'{x:.2f}' for x in bare)})")
        print(f"kompl ingest (in-process service, fresh workspace): {k:6.2f} s  (rounds: {', '.join(f'{x:.2f}' for x in komp)})")
        print(f"ratio kompl / bare      : {k / b:6.2f}x  (goal <= 1.3x)")
    start = cold_start()
    print(f"kompl --help cold start : {start:6.3f} s  best of 5 subprocess runs (goal < 0.3 s)")


if __name__ == "__main__":
    main()
