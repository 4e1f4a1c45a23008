"""`kompl demo`: build a wiki from the bundled example corpus and ask it a question, offline."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from kompl.cli.common import esc, out_console, print_json
from kompl.errors import EXIT_FAILURES

QUESTION = "Did the penicillin spore really come through Fleming's open window?"


def demo(
    directory: Annotated[Path, typer.Argument(help="Where to create the demo workspace.")] = Path("kompl-demo"),
    question: Annotated[str, typer.Option(help="The question asked of the finished wiki.")] = QUESTION,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Create a workspace from the bundled example (seven documents about penicillin) and run the main job on it.

    Runs ingest → compile (extract, resolve, conflicts, plan, draft) → approve → ask,
    with the configured model (the offline one by default: no API key, no network).
    Run it again to see that nothing is stored twice and no model call is repeated.

    Example:

        kompl demo /tmp/penicillin-wiki && kompl --home /tmp/penicillin-wiki pages
    """
    from kompl import db, review
    from kompl.demo import example_dir
    from kompl.ingest import expand, ingest
    from kompl.pipeline.compile import compile_workspace
    from kompl.read.ask import ask
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(directory)
    conn = db.connect(ws.db_path)
    with closing(conn):
        items, ingested = expand([str(example_dir())])
        ingested = ingest(ws, conn, items, report=ingested)
        compiled = compile_workspace(ws, conn)
        approved = review.approve(ws, conn, review.ALL)
        answer = ask(ws, conn, question)
        pages = conn.execute("SELECT page_type, COUNT(*) FROM pages WHERE status='active' GROUP BY page_type").fetchall()
    ok = ingested.ok and compiled.ok and not approved.failed
    if json_out:
        print_json({"workspace": str(ws.root), "ingest": ingested.to_dict(), "compile": compiled.to_dict(),
                    "approve": approved.to_dict(), "pages": dict(pages),
                    "ask": {"question": question, "answer": answer.answer, "citations": answer.citations}})
    else:
        console = out_console()
        home = esc(ws.root)
        console.print(f"Workspace: [bold]{home}[/] (model: {esc(compiled.model)})")
        console.print(f"ingest:  {len(ingested.ingested)} new, {len(ingested.duplicates)} already there, {len(ingested.failed)} failed")
        console.print(f"compile: {compiled.plans} page plan(s), {compiled.drafted} drafted, {compiled.llm_calls} model call(s)")
        console.print(f"approve: {len(approved.approved)} committed; pages now: "
                      + ", ".join(f"{n} {t}" for t, n in pages))
        console.print(f"\n[bold]Q:[/] {esc(question)}")
        console.print(esc(answer.answer))
        for cite in answer.citations:
            console.print(f"  [dim]cited:[/] {esc(cite['title'])}")
        console.print(f"\nNext: [bold]kompl --home {home} pages[/], [bold]kompl --home {home} show \"Alexander Fleming\"[/], "
                      f"[bold]kompl --home {home} ask \"...\"[/], or open {home}/data/pages in Obsidian.")
    if not ok:
        raise typer.Exit(EXIT_FAILURES)
