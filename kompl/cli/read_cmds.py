"""`kompl search`, `kompl ask`, `kompl chat`, `kompl mcp`: read the wiki and answer from it."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer

from kompl.cli.common import err_console, esc, open_workspace, out_console, print_json


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    page_type: Annotated[str | None, typer.Option("--type", help="Only pages of this type (source, entity, concept, comparison, overview, answer).")] = None,
    category: Annotated[str | None, typer.Option("--category", help="Only pages of this category (person, organisation, place, ...).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many results.")] = 10,
    explain: Annotated[bool, typer.Option("--explain", help="Show each result's score components.")] = False,
    include_drafts: Annotated[bool, typer.Option("--include-drafts", help="Also search drafts waiting for review (marked as drafts).")] = False,
    include_archived: Annotated[bool, typer.Option("--include-archived", help="Also search pages whose sources are all archived.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array of {page_id, title, score, scores, ...}.")] = False,
) -> None:
    """Search the wiki: full text (bm25) and vectors, fused by reciprocal rank.

    Only committed pages with an active source are searched unless asked otherwise.

    Examples:

        kompl search "penicillin production" --limit 5 --explain

        kompl search fleming --type entity --json
    """
    from kompl.read.search import search as run_search

    ws, conn = open_workspace(ctx)
    with closing(conn):
        found = run_search(ws, conn, query, limit=limit, page_type=page_type, category=category,
                           include_drafts=include_drafts, include_archived=include_archived)
    for note in found.notes:
        err_console().print(f"[yellow]note:[/] {esc(note)}", soft_wrap=True)
    if json_out:
        print_json(found.to_list())
        return
    console = out_console()
    if not found.hits:
        console.print("No results.")
        return
    for n, hit in enumerate(found.hits, 1):
        marks = (" [magenta]\\[draft][/]" if hit.draft else "") + (" [yellow]\\[archived][/]" if hit.archived else "")
        ref = f"plan {hit.plan_id}" if hit.draft else f"page {hit.page_id}"
        console.print(f"{n:>2}. [bold]{esc(hit.title)}[/]{marks}  [dim]{hit.page_type} · {ref} · {hit.score:.4f}[/]")
        if hit.snippet:
            console.print(f"    {esc(' '.join(hit.snippet.split()))}", soft_wrap=False)
        if explain:
            parts = ", ".join(f"{k}={v}" for k, v in hit.scores.items() if v is not None)
            console.print(f"    [dim]{esc(parts)}[/]")


def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    model: Annotated[str | None, typer.Option("--model", help="Model to answer with (any litellm model string; default: the workspace's, kompl/offline unless set).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print {answer, citations, pages_used, removed_citations, model}.")] = False,
) -> None:
    """Answer a question from the wiki, citing the pages used.

    Citations are checked: a cited page must be one the model was given. Questions
    about the wiki itself ("how many sources?") are answered from the database.

    Examples:

        kompl ask "Who discovered penicillin, and when?"

        kompl ask "how many sources" --json
    """
    from kompl.read.ask import ask as run_ask

    ws, conn = open_workspace(ctx)
    with closing(conn):
        result = run_ask(ws, conn, question, model=model)
    if json_out:
        data = result.to_dict()
        print_json({k: data[k] for k in ("answer", "citations", "pages_used", "removed_citations", "model",
                                         "left_out", "from_database", "notes")})
        return
    from rich.markdown import Markdown

    console, err = out_console(), err_console()
    for note in result.notes:
        err.print(f"[yellow]note:[/] {esc(note)}", soft_wrap=True)
    console.print(Markdown(result.answer))
    if result.citations:
        console.print("\n[bold]Cited:[/] " + "; ".join(f"{esc(c['title'])} [dim](page {c['page_id']})[/]"
                                                      for c in result.citations))
    if result.removed_citations:
        err.print("[yellow]removed citations[/] (pages the model was not given): "
                  + ", ".join(str(c["page_id"]) for c in result.removed_citations))
    if result.left_out:
        err.print(f"[dim]{len(result.left_out)} item(s) left out of the context for its budget "
                  "(see --json: left_out)[/]")
    console.print(f"[dim]{esc(result.model)}[/]")


def chat(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option("--session", help="Resume this chat session (its id is shown when it starts).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model to answer with (default: the workspace's).")] = None,
) -> None:
    """Chat with the wiki: questions with history, answers with citations.

    Inside the chat: /sources (what the last answer used), /save (the last answer
    becomes a draft page to review), /new (a new session), /quit.

    Example:

        kompl chat --session 1a2b3c4d
    """
    from rich.markup import escape
    from rich.prompt import Prompt

    from kompl.read.chat import ChatSession, run_chat

    ws, conn = open_workspace(ctx)
    console = out_console()
    with closing(conn):
        chat_session = ChatSession(ws, conn, session_id=session, model=model)

        def read(prompt: str) -> str:
            return Prompt.ask(f"[bold cyan]{escape(prompt.strip())}[/]", console=console)

        sid = run_chat(chat_session, read=read, write=lambda text: console.print(escape(text), soft_wrap=True))
    if sid:
        console.print(f"[dim]session {sid}: resume with `kompl chat --session {sid}`[/]")


def mcp(ctx: typer.Context) -> None:
    """Serve the wiki to agents over MCP (stdio), read-only.

    Register it with an MCP client as the command `kompl --home DIR mcp`.

    Example:

        kompl --home ~/wiki mcp
    """
    from kompl.cli.common import home_of
    from kompl.mcp_server import serve
    from kompl.workspace import find_workspace

    serve(find_workspace(home_of(ctx)))
