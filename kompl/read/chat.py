"""Chat: questions and answers with history, in sessions that persist.

    session = ChatSession(ws, conn, session_id=None)      # a new session, or resume one by id
    result = session.ask("Who found penicillin?")         # an AskResult, stored with the question
    run_chat(session, read=input, write=print)            # the interactive loop

This module owns the `chat_sessions` and `chat_messages` tables (m010). Each
question is answered by `kompl.read.ask.ask` with the session's messages as
history; ask keeps the MOST RECENT of them that fit its budget, in order, and
never gives up the new question for them.

`/save` turns the last answer into a pending draft page (a `page_plans` row,
page type 'answer', status 'drafted'): its body is the answer with each page
citation replaced by the source ids behind that page, and its provenance
(`inputs.sources`) is those SOURCE ids, so it is approved or rejected like any
other draft. The cited page ids are kept in `inputs.cited_pages`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any

from kompl import db
from kompl.errors import KomplError, NotFoundError
from kompl.read.ask import AskResult, ask
from kompl.read.search import terms
from kompl.workspace import Workspace

HISTORY_FETCH = 200  # newest messages loaded per question; ask() keeps those that fit its budget
FOLLOW_UP_TERMS = 5  # a question with this few words also searches with the previous question
ANSWER_PAGE_TYPE = "answer"
COMMANDS = "/sources  /save  /new  /quit"
_INLINE = re.compile(r"\[page:\s*(\d+)\]")


class ChatSession:
    """One conversation. Created in the database with its first question."""

    def __init__(self, ws: Workspace, conn: sqlite3.Connection, *, session_id: str | None = None,
                 model: str | None = None, gateway: Any = None, vector_index: Any = None,
                 context_tokens: int | None = None):
        self.ws, self.conn, self.model = ws, conn, model
        self.gateway, self.vector_index, self.context_tokens = gateway, vector_index, context_tokens
        self.session_id: str | None = None
        self.last: AskResult | None = None
        if session_id:
            row = conn.execute("SELECT session_id FROM chat_sessions WHERE session_id = ?", (session_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"No chat session {session_id!r}", hint="start a new one with `kompl chat`")
            self.session_id = session_id
            self.last = self._last_from_db()

    # -- questions -------------------------------------------------------------------

    def history(self) -> list[dict[str, str]]:
        """The session's newest HISTORY_FETCH messages, oldest first, as [{role, content}]."""
        if self.session_id is None:
            return []
        rows = self.conn.execute(
            "SELECT role, content FROM chat_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (self.session_id, HISTORY_FETCH)).fetchall()
        return [{"role": r["role"], "content": r["content"]} for r in reversed(rows)]

    def ask(self, question: str) -> AskResult:
        history = self.history()
        retrieval = question
        previous = next((t["content"] for t in reversed(history) if t["role"] == "user"), None)
        if previous and len(terms(question)) <= FOLLOW_UP_TERMS:
            retrieval = f"{previous} {question}"  # "and when did he die?" needs the earlier subject
        result = ask(self.ws, self.conn, question, model=self.model, gateway=self.gateway, history=history,
                     vector_index=self.vector_index, context_tokens=self.context_tokens, retrieval_query=retrieval)
        self._store(question, result)
        self.last = result
        return result

    def new(self) -> None:
        """Start over: the next question opens a new session."""
        self.session_id, self.last = None, None

    def last_sources(self) -> dict[str, Any] | None:
        """What the last answer used: cited pages, pages given to the model, removed citations."""
        if self.last is None:
            return None
        return {"citations": self.last.citations, "pages_used": self.last.pages_used,
                "removed_citations": self.last.removed_citations, "model": self.last.model}

    def save_last(self) -> dict[str, Any]:
        """Queue the last answer as a draft 'answer' page (see `save_answer`)."""
        if self.last is None:
            raise KomplError("There is no answer to save yet", hint="ask a question first")
        return save_answer(self.ws, self.conn, self.last)

    # -- storage ---------------------------------------------------------------------

    def _store(self, question: str, result: AskResult) -> None:
        now = db.utcnow()
        with db.transaction(self.conn):
            if self.session_id is None:
                self.session_id = uuid.uuid4().hex[:8]
                self.conn.execute(
                    "INSERT INTO chat_sessions (session_id, title, model, created_at, updated_at) VALUES (?,?,?,?,?)",
                    (self.session_id, question[:200], result.model, now, now))
            self.conn.execute("UPDATE chat_sessions SET updated_at = ?, model = ? WHERE session_id = ?",
                              (now, result.model, self.session_id))
            self.conn.execute("INSERT INTO chat_messages (session_id, role, content, created_at) VALUES (?,?,?,?)",
                              (self.session_id, "user", question, now))
            self.conn.execute(
                "INSERT INTO chat_messages (session_id, role, content, citations, pages_used, removed, model,"
                " llm_call_id, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (self.session_id, "assistant", result.answer, json.dumps(result.citations),
                 json.dumps(result.pages_used), json.dumps(result.removed_citations), result.model,
                 result.llm_call_id, now))

    def _last_from_db(self) -> AskResult | None:
        rows = self.conn.execute(
            "SELECT role, content, citations, pages_used, removed, model, llm_call_id FROM chat_messages"
            " WHERE session_id = ? ORDER BY id DESC LIMIT 2", (self.session_id,)).fetchall()
        if len(rows) < 2 or rows[0]["role"] != "assistant" or rows[1]["role"] != "user":
            return None
        answer, question = rows
        return AskResult(question=question["content"], answer=answer["content"],
                         citations=json.loads(answer["citations"]), pages_used=json.loads(answer["pages_used"]),
                         removed_citations=json.loads(answer["removed"]), model=answer["model"] or "",
                         llm_call_id=answer["llm_call_id"])


def list_sessions(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT s.session_id, s.title, s.model, s.updated_at, COUNT(m.id) AS messages FROM chat_sessions s"
        " LEFT JOIN chat_messages m ON m.session_id = s.session_id GROUP BY s.session_id"
        " ORDER BY s.updated_at DESC LIMIT ?", (limit,)).fetchall()
    return [dict(r) for r in rows]


# --- saving an answer as a draft page ---------------------------------------------------------

def answer_page_key(question: str) -> str:
    norm = " ".join(question.lower().split())
    return f"{ANSWER_PAGE_TYPE}:{hashlib.sha256(norm.encode('utf-8')).hexdigest()[:16]}"


def save_answer(ws: Workspace, conn: sqlite3.Connection, result: AskResult) -> dict[str, Any]:
    """Put `result` in the outbox as a drafted 'answer' page plan. Returns {plan_id, page_key, title, sources, cited_pages}.

    Provenance is the ACTIVE sources behind the cited pages (page_sources), never
    the page ids. An answer that cites no page, or only pages without active
    sources, has no provenance and is refused.
    """
    if result.from_database or not result.citations:
        raise KomplError("The last answer cites no wiki pages, so it has no sources to save it with",
                         hint="ask a question the wiki answers with citations, then /save")
    cited = [int(c["page_id"]) for c in result.citations]
    by_page: dict[int, list[str]] = {}
    for page_id in cited:
        by_page[page_id] = [r[0] for r in conn.execute(
            "SELECT ps.source_id FROM page_sources ps JOIN sources s ON s.source_id = ps.source_id"
            " WHERE ps.page_id = ? AND s.status = 'active' ORDER BY ps.source_id", (page_id,))]
    sources = sorted({s for ids in by_page.values() for s in ids})
    if not sources:
        raise KomplError("The pages the last answer cites have no active sources", hint="nothing to save")
    page_key = answer_page_key(result.question)
    title = _title(result.question)
    draft = _draft_body(result, by_page)
    existing = conn.execute("SELECT page_id, version, status FROM pages WHERE page_key = ?", (page_key,)).fetchone()
    current = existing is not None and existing["status"] == "active"
    old_sources = set()
    if current:
        old_sources = {r[0] for r in conn.execute("SELECT source_id FROM page_sources WHERE page_id = ?",
                                                  (existing["page_id"],))}
    inputs = {"sources": sources, "new_sources": sorted(set(sources) - old_sources), "removed_sources": [],
              "cited_pages": cited, "question": result.question}
    inputs_hash = hashlib.sha256(json.dumps(
        {"page_key": page_key, "page_type": ANSWER_PAGE_TYPE, "title": title, "sources": sources,
         "cited_pages": cited, "draft": hashlib.sha256(draft.encode("utf-8")).hexdigest()},
        sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    if conn.execute("SELECT 1 FROM tombstones WHERE page_key = ? AND inputs_hash = ?", (page_key, inputs_hash)).fetchone():
        raise KomplError("This answer was saved before and its draft was rejected",
                         hint="ask again (a different answer can be saved), or edit the wiki by hand")
    now = db.utcnow()
    summary = f"A saved answer to the question: {title}"
    with db.transaction(conn, "answer_saved", target=page_key,
                        details={"sources": sources, "cited_pages": cited, "question": result.question}):
        conn.execute("UPDATE page_plans SET status = 'superseded', decided_reason = ?, decided_at = ?, updated_at = ?"
                     " WHERE page_key = ? AND status IN ('planned', 'drafted', 'failed')",
                     ("a newer answer to the same question was saved", now, now, page_key))
        cur = conn.execute(
            "INSERT INTO page_plans (page_key, page_type, title, category, action, page_id, base_version, status,"
            " inputs_hash, inputs, draft, summary, model, llm_call_id, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (page_key, ANSWER_PAGE_TYPE, title, "other", "update" if current else "create",
             existing["page_id"] if current else None, existing["version"] if current else None, "drafted",
             inputs_hash, json.dumps(inputs, ensure_ascii=False), draft, summary, result.model or "unknown",
             result.llm_call_id, now, now))
    return {"plan_id": cur.lastrowid, "page_key": page_key, "title": title, "sources": sources, "cited_pages": cited}


def _title(question: str) -> str:
    text = " ".join(question.split())
    return text if len(text) <= 120 else text[:119].rstrip() + "…"


def _draft_body(result: AskResult, by_page: dict[int, list[str]]) -> str:
    """The answer with [page:N] replaced by the source ids behind page N, then the cited pages."""
    def cite(match: re.Match) -> str:
        ids = by_page.get(int(match.group(1)))
        return f"[{', '.join(ids)}]" if ids else ""

    body = _INLINE.sub(cite, result.answer).strip()
    lines = [body, "", "## Pages this answer cites", ""]
    for c in result.citations:
        ids = by_page.get(int(c["page_id"])) or []
        lines.append(f"- {c['title']}" + (f" [{', '.join(ids)}]" if ids else ""))
    return "\n".join(lines) + "\n"


# --- the interactive loop --------------------------------------------------------------------

def format_answer(result: AskResult) -> str:
    lines = [result.answer]
    if result.citations:
        lines += ["", "Cited: " + "; ".join(f"{c['title']} [page:{c['page_id']}]" for c in result.citations)]
    if result.removed_citations:
        lines.append("Removed citations (pages the model was not given): "
                     + ", ".join(str(c["page_id"]) for c in result.removed_citations))
    for note in result.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def format_sources(info: dict[str, Any] | None) -> str:
    if info is None:
        return "No answer yet."
    lines = [f"Model: {info['model']}"]
    lines.append("Cited:" if info["citations"] else "Cited: nothing")
    lines += [f"  - {c['title']} (page {c['page_id']})" for c in info["citations"]]
    lines.append("Given to the model:" if info["pages_used"] else "Given to the model: no pages")
    lines += [f"  - {p['title']} (page {p['page_id']})" for p in info["pages_used"]]
    if info["removed_citations"]:
        lines.append("Removed citations: " + ", ".join(str(c["page_id"]) for c in info["removed_citations"]))
    return "\n".join(lines)


def run_chat(session: ChatSession, *, read: Callable[[str], str], write: Callable[[str], None],
             prompt: str = "you> ") -> str | None:
    """Run the loop until /quit or end of input. Returns the session id (None if nothing was asked).

    `read(prompt)` returns one line (raising EOFError at the end); `write(text)`
    shows text. Errors (a failing model, nothing to save) are shown, not raised.
    """
    write(f"Ask a question about the wiki. Commands: {COMMANDS}"
          + (f"  (session {session.session_id})" if session.session_id else ""))
    while True:
        try:
            line = read(prompt)
        except (EOFError, KeyboardInterrupt):
            break
        line = (line or "").strip()
        if not line:
            continue
        if line.startswith("/"):
            command = line.split()[0].lower()
            if command in ("/quit", "/exit", "/q"):
                break
            try:
                write(_command(session, command))
            except KomplError as exc:
                write(f"error: {exc}")
            continue
        try:
            write(format_answer(session.ask(line)))
        except KomplError as exc:
            write(f"error: {exc}")
    return session.session_id


def _command(session: ChatSession, command: str) -> str:
    if command == "/new":
        old = session.session_id
        session.new()
        return "Started a new session." + (f" (resume the last one with --session {old})" if old else "")
    if command == "/sources":
        return format_sources(session.last_sources())
    if command == "/save":
        saved = session.save_last()
        return (f"Saved as draft {saved['plan_id']} ({saved['title']}), from {len(saved['sources'])} source(s)."
                " Review it with `kompl drafts` / `kompl approve`.")
    if command in ("/help", "/?"):
        return f"Commands: {COMMANDS}"
    return f"Unknown command {command}. Commands: {COMMANDS}"


__all__ = ["ChatSession", "answer_page_key", "format_answer", "format_sources", "list_sessions", "run_chat",
           "save_answer"]
