"""Answer a question from the wiki, with citations that are checked.

    result = ask(ws, conn, "Who found penicillin?")          # -> AskResult
    result.answer, result.citations, result.removed_citations

Steps: questions about the wiki itself ("how many sources", "what did I add
last") are answered from the database with no model call. Otherwise the
question retrieves pages with hybrid search (committed, visible pages only),
`kompl.read.context` fits instructions + question (never cut), the most recent
conversation turns and each page's most relevant passages into the model's
budget, and the gateway runs the `answer` prompt. A citation survives only if
it names a page that was given to the model; the others are removed from the
citation list and from the answer text, and reported in `removed_citations`.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from kompl.errors import KomplError
from kompl.read.context import Context, build_context
from kompl.read.search import search
from kompl.text import approx_tokens
from kompl.wiki import markdown as md
from kompl.wiki import store
from kompl.workspace import Workspace

ASK_PAGES = 6  # pages retrieved for a question
OFFLINE_CONTEXT_TOKENS = 6000
DEFAULT_CONTEXT_TOKENS = 16000  # a real model whose window litellm does not know
CONTEXT_CAP_TOKENS = 32000  # more context costs more and rarely helps: an upper bound
ANSWER_MAX_OUTPUT_TOKENS = 1500
DATABASE_MODEL = "kompl/database"
NO_PAGES_MODEL = "kompl/retrieval"
_INLINE = re.compile(r"\s?\[page:\s*(\d+)\]")


class Citation(BaseModel):
    page_id: int
    title: str = ""


class AnswerResult(BaseModel):
    """What the `answer` prompt returns."""

    answer: str
    citations: list[Citation] = Field(default_factory=list)
    model: str = ""


@dataclass
class AskResult:
    question: str
    answer: str
    citations: list[dict[str, Any]] = field(default_factory=list)  # [{page_id, title}]
    pages_used: list[dict[str, Any]] = field(default_factory=list)  # [{page_id, title}] given to the model
    removed_citations: list[dict[str, Any]] = field(default_factory=list)  # [{page_id, title, reason}]
    model: str = ""
    left_out: list[dict[str, Any]] = field(default_factory=list)
    llm_call_id: int | None = None
    from_database: bool = False
    notes: list[str] = field(default_factory=list)
    prompt_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ask(
    ws: Workspace,
    conn: sqlite3.Connection,
    question: str,
    *,
    model: str | None = None,
    gateway: Any = None,
    history: list[dict[str, str]] | None = None,
    limit: int = ASK_PAGES,
    context_tokens: int | None = None,
    vector_index: Any = None,
    retrieval_query: str | None = None,
) -> AskResult:
    """Answer `question` from the wiki. `history`: earlier turns [{role, content}], oldest first.

    `gateway` defaults to `Gateway(ws, conn, model=model)`; `retrieval_query`
    (default: the question) is what is searched for.
    """
    question = (question or "").strip()
    if not question:
        raise KomplError("The question is empty", hint='ask something, e.g. kompl ask "Who discovered penicillin?"')
    local = answer_from_database(conn, question)
    if local is not None:
        return local
    found = search(ws, conn, retrieval_query or question, limit=limit, vector_index=vector_index)
    pages = []
    for hit in found.hits:
        _front, body = md.split_frontmatter(store.content(conn, hit.page_id))
        pages.append({"page_id": hit.page_id, "title": hit.title, "body": body})
    if not pages:
        return AskResult(question=question, answer="I found nothing in the wiki about this question.",
                         model=NO_PAGES_MODEL, notes=found.notes)
    if gateway is None:
        from kompl.llm import Gateway

        gateway = Gateway(ws, conn, model=model)
    budget = context_tokens or context_budget(gateway)
    context = build_context(question, pages, list(history or []), budget=budget,
                            measure=lambda p, h: prompt_tokens(question, p, h))
    result = run_answer(gateway, question, context)
    out = check_citations(result, context)
    out.question, out.notes = question, found.notes
    out.model = out.model or str(getattr(gateway, "model", ""))
    return out


def run_answer(gateway: Any, question: str, context: Context) -> tuple[AnswerResult, int | None]:
    from kompl.llm import Task

    task = Task(purpose="answer", prompt="answer",
                variables={"question": question, "pages": context.pages, "history": context.history},
                schema=AnswerResult, max_output_tokens=ANSWER_MAX_OUTPUT_TOKENS,
                meta={"pages": [p["page_id"] for p in context.pages], "left_out": len(context.left_out)})
    return gateway.run(task), task.call_id


def check_citations(reply: tuple[AnswerResult, int | None], context: Context) -> AskResult:
    """Keep citations of pages the model was given; remove the rest from the list and the text."""
    result, call_id = reply
    given = {p["page_id"]: p["title"] for p in context.pages}
    kept: dict[int, dict] = {}
    removed: dict[int, dict] = {}
    reason = "not among the pages given to the model"
    for cite in result.citations:
        if cite.page_id in given:
            kept.setdefault(cite.page_id, {"page_id": cite.page_id, "title": given[cite.page_id]})
        else:
            removed.setdefault(cite.page_id, {"page_id": cite.page_id, "title": cite.title, "reason": reason})

    def inline(match: re.Match) -> str:
        page_id = int(match.group(1))
        if page_id in given:
            kept.setdefault(page_id, {"page_id": page_id, "title": given[page_id]})
            return match.group(0)
        removed.setdefault(page_id, {"page_id": page_id, "title": "", "reason": reason})
        return ""

    answer = _INLINE.sub(inline, result.answer)
    return AskResult(
        question="", answer=answer.strip(), citations=list(kept.values()),
        pages_used=[{"page_id": pid, "title": title} for pid, title in given.items()],
        removed_citations=list(removed.values()), model=result.model,
        left_out=context.left_out, llm_call_id=call_id, prompt_tokens=context.prompt_tokens,
    )


def prompt_tokens(question: str, pages: list[dict], history: list[dict]) -> int:
    """Tokens of the rendered `answer` prompt (system, JSON instruction and user parts)."""
    from kompl import prompts

    system, user, _ = prompts.render("answer", {"question": question, "pages": pages, "history": history})
    schema_text = prompts.json_instruction(AnswerResult.model_json_schema())
    return approx_tokens(system) + approx_tokens(schema_text) + approx_tokens(user) + 8


def context_budget(gateway: Any) -> int:
    """Input tokens to fill for this gateway's model (its window, capped; a fixed size offline)."""
    if getattr(gateway, "offline", False):
        return OFFLINE_CONTEXT_TOKENS
    known = getattr(gateway, "context_tokens", None)
    if known:
        return int(known)
    try:
        from kompl.llm import (
            _litellm,  # FIXME(issue 5): llm.py to expose the model's input window
        )

        info = _litellm().get_model_info(gateway.model)
        window = int(info.get("max_input_tokens") or info.get("max_tokens") or 0)
    except Exception:  # noqa: BLE001 - an unknown model gets the default window
        window = 0
    if not window:
        return DEFAULT_CONTEXT_TOKENS
    return max(1000, min(CONTEXT_CAP_TOKENS, window - ANSWER_MAX_OUTPUT_TOKENS))


# --- questions about the wiki itself ------------------------------------------------------

_META_WORDS = frozenset(
    ["how", "many", "much", "what", "which", "who", "when", "did", "do", "does", "i", "we", "you", "have", "has", "had", "add", "added", "adding", "ingest", "ingested", "import", "imported", "save", "saved", "put", "last", "latest", "recent", "recently", "most", "newest", "new", "sources", "source", "documents", "document", "docs", "doc", "files", "file", "pages", "page", "articles", "drafts", "draft", "pending", "wiki", "kompl", "the", "a", "an", "in", "my", "our", "this", "there", "are", "is", "total", "currently", "now", "so", "far", "far", "yet", "all", "active", "archived", "count", "number", "of", "were", "was", "show", "list", "me", "tell", "give"]
)
_ASKS_COUNT = re.compile(r"\b(how many|how much|number of|count)\b")
_ASKS_LAST = re.compile(r"\b(last|latest|recent(ly)?|newest)\b")
_ABOUT = {
    "sources": re.compile(r"\b(sources?|documents?|docs?|files?)\b"),
    "pages": re.compile(r"\b(pages?|articles?)\b"),
    "drafts": re.compile(r"\b(drafts?|pending)\b"),
}


def answer_from_database(conn: sqlite3.Connection, question: str) -> AskResult | None:
    """An answer to a question about the wiki itself, or None when the question is about something else.

    Only questions made entirely of such words ("how many sources are there?",
    "what did I add last?") qualify; a question naming anything else goes to retrieval.
    """
    q = question.lower()
    words = re.findall(r"[a-z]+", q)
    if not words or any(w not in _META_WORDS for w in words):
        return None
    about = [k for k, rx in _ABOUT.items() if rx.search(q)]
    lines: list[str] = []
    if _ASKS_LAST.search(q) and not _ASKS_COUNT.search(q):
        rows = conn.execute("SELECT source_id, title, ingested_at FROM sources WHERE status = 'active'"
                            " ORDER BY ingested_at DESC, rowid DESC LIMIT 5").fetchall()
        if "pages" in about:
            rows = conn.execute(f"SELECT page_id, title, updated_at FROM pages WHERE page_id IN ({store.visible_page_ids_sql()})"
                                " ORDER BY updated_at DESC LIMIT 5").fetchall()
            lines = ["The most recently changed pages:"] + [f"- {r[1]} (page {r[0]}, {r[2]})" for r in rows]
        else:
            lines = ["The most recently added sources:"] + [f"- {r[1]} ({r[0]}, added {r[2]})" for r in rows]
        if len(lines) == 1:
            lines = ["Nothing has been added yet."]
    elif _ASKS_COUNT.search(q) and about:
        for kind in about:
            lines.append(_count_line(conn, kind))
    else:
        return None
    return AskResult(question=question, answer="\n".join(lines), model=DATABASE_MODEL, from_database=True)


def _count_line(conn: sqlite3.Connection, kind: str) -> str:
    if kind == "sources":
        counts = {r[0]: r[1] for r in conn.execute("SELECT status, COUNT(*) FROM sources GROUP BY status")}
        return f"{counts.get('active', 0)} active source(s), {counts.get('archived', 0)} archived."
    if kind == "pages":
        rows = conn.execute(f"SELECT page_type, COUNT(*) FROM pages WHERE page_id IN ({store.visible_page_ids_sql()})"
                            " GROUP BY page_type ORDER BY page_type").fetchall()
        total = sum(r[1] for r in rows)
        detail = ", ".join(f"{r[1]} {r[0]}" for r in rows)
        return f"{total} page(s)" + (f": {detail}." if detail else ".")
    n = conn.execute("SELECT COUNT(*) FROM page_plans WHERE status = 'drafted'").fetchone()[0]
    return f"{n} draft(s) waiting for review."


__all__ = ["AnswerResult", "AskResult", "Citation", "answer_from_database", "ask", "check_citations",
           "context_budget", "prompt_tokens"]
