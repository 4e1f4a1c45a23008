"""Chat: scripted sessions, history = the latest turns, persistence, and /save -> an approvable draft."""

from __future__ import annotations

import json

import pytest
from test_ask import FakeGateway
from test_search import ACTIVE_A, ACTIVE_B, ARCHIVED, build_wiki

from kompl import db
from kompl.errors import KomplError, NotFoundError
from kompl.read.chat import ChatSession, answer_page_key, run_chat
from kompl.read.search import search


@pytest.fixture
def wiki(ws, conn):
    return build_wiki(ws, conn)


def script(session, lines):
    """Run the loop on scripted input; returns everything it wrote."""
    queue = list(lines)
    out: list[str] = []

    def read(prompt):
        if not queue:
            raise EOFError
        return queue.pop(0)

    sid = run_chat(session, read=read, write=out.append)
    return sid, "\n".join(out)


def test_scripted_session_answers_and_persists(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False)
    sid, out = script(session, ["When did Fleming notice the mould?", "/sources", "/quit", "never read"])
    assert "September 1928" in out and "Cited:" in out
    assert "Given to the model:" in out and "Alexander Fleming" in out
    rows = conn.execute("SELECT role, content FROM chat_messages WHERE session_id = ? ORDER BY id", (sid,)).fetchall()
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert conn.execute("SELECT COUNT(*) FROM chat_sessions").fetchone()[0] == 1


def test_resume_passes_earlier_turns_as_history(ws, conn, wiki):
    first = ChatSession(ws, conn, vector_index=False)
    first.ask("When did Fleming notice the mould?")
    gw = FakeGateway()
    resumed = ChatSession(ws, conn, session_id=first.session_id, gateway=gw, vector_index=False)
    assert resumed.last is not None and resumed.last.citations  # /sources and /save work after a resume
    resumed.ask("And what about Howard Florey at Oxford?")
    history = gw.tasks[0].variables["history"]
    assert [t["role"] for t in history] == ["user", "assistant"]
    assert history[0]["content"] == "When did Fleming notice the mould?"


def test_unknown_session_is_an_error(ws, conn):
    with pytest.raises(NotFoundError):
        ChatSession(ws, conn, session_id="nope")


def test_history_holds_the_latest_turns_not_the_first(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False, gateway=FakeGateway(), context_tokens=2500)
    session.ask("penicillin turn 0 " + "filler " * 40)
    with db.transaction(conn):
        for n in range(1, 120):
            for role in ("user", "assistant"):
                conn.execute("INSERT INTO chat_messages (session_id, role, content, created_at) VALUES (?,?,?,?)",
                             (session.session_id, role, f"penicillin turn {n} {role} " + "filler " * 40, db.utcnow()))
    gw = FakeGateway()
    session.gateway = gw
    question = "So who purified penicillin at Oxford?"
    session.ask(question)
    history = gw.tasks[0].variables["history"]
    numbers = [int(t["content"].split()[2]) for t in history]
    assert numbers[-1] == 119 and 0 not in numbers and numbers == sorted(numbers)
    assert len(history) < 240
    _system, user = gw.rendered[0]
    assert user.rstrip().endswith(json.dumps(question))


def test_new_starts_another_session(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False)
    sid, out = script(session, ["Who was Alexander Fleming?", "/new", "Who was Howard Florey?"])
    assert "Started a new session" in out
    assert conn.execute("SELECT COUNT(*) FROM chat_sessions").fetchone()[0] == 2
    gw = FakeGateway()
    fresh = ChatSession(ws, conn, session_id=sid, gateway=gw, vector_index=False)
    fresh.ask("anything about penicillin?")
    assert all("Fleming" not in t["content"] for t in gw.tasks[0].variables["history"])


def test_model_failure_is_shown_and_the_loop_goes_on(ws, conn, wiki):
    from kompl.llm import ModelCallError

    class Failing(FakeGateway):
        def run(self, task):
            raise ModelCallError("provider down", hint="try later")

    session = ChatSession(ws, conn, vector_index=False, gateway=Failing())
    _sid, out = script(session, ["Who was Alexander Fleming?", "/save", "how many sources"])
    assert "provider down" in out and "no answer to save" in out.lower()
    assert "2 active source(s)" in out


# --- /save --------------------------------------------------------------------------------------

def saved_plan(conn):
    row = conn.execute("SELECT * FROM page_plans WHERE page_type = 'answer' ORDER BY plan_id DESC LIMIT 1").fetchone()
    return dict(row) | {"inputs": json.loads(row["inputs"])}


def test_save_makes_a_draft_whose_sources_are_source_ids(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False)
    question = "What is penicillin and who purified it at Oxford?"
    _sid, out = script(session, [question, "/save"])
    assert "Saved as draft" in out
    plan = saved_plan(conn)
    assert plan["status"] == "drafted" and plan["action"] == "create" and plan["page_key"] == answer_page_key(question)
    assert plan["title"] == question
    cited = plan["inputs"]["cited_pages"]
    assert cited and all(isinstance(p, int) for p in cited)
    assert plan["inputs"]["sources"] and all(s.startswith("src-") for s in plan["inputs"]["sources"])
    assert set(plan["inputs"]["sources"]) <= {ACTIVE_A, ACTIVE_B}  # never the archived one
    assert "[page:" not in plan["draft"] and "[src-" in plan["draft"]


def test_save_without_citations_is_refused(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False)
    _sid, out = script(session, ["how many sources", "/save"])
    assert "error:" in out and "cites no wiki pages" in out
    assert conn.execute("SELECT COUNT(*) FROM page_plans WHERE page_type = 'answer'").fetchone()[0] == 0


def test_saving_the_same_question_twice_supersedes_the_first_draft(ws, conn, wiki):
    session = ChatSession(ws, conn, vector_index=False)
    script(session, ["Who was Alexander Fleming?", "/save", "Who was Alexander Fleming?", "/save"])
    rows = conn.execute("SELECT status FROM page_plans WHERE page_type = 'answer' ORDER BY plan_id").fetchall()
    assert [r[0] for r in rows] == ["superseded", "drafted"]


def test_saved_answer_can_be_approved_and_then_found(ws, conn, wiki):
    review = pytest.importorskip("kompl.review")
    session = ChatSession(ws, conn, vector_index=False)
    question = "When did Fleming notice the mould killing bacteria?"
    session.ask(question)
    saved = session.save_last()
    report = review.approve(ws, conn, [saved["plan_id"]])
    assert not report.failed, report.failed
    page = conn.execute("SELECT * FROM pages WHERE page_key = ?", (saved["page_key"],)).fetchone()
    assert page is not None and page["page_type"] == "answer"
    sources = [r[0] for r in conn.execute("SELECT source_id FROM page_sources WHERE page_id = ?", (page["page_id"],))]
    assert sources == saved["sources"] and all(s.startswith("src-") for s in sources)
    found = search(ws, conn, "Fleming mould killing bacteria", vector_index=False, page_type="answer")
    assert [h.page_id for h in found] == [page["page_id"]]


def test_nothing_to_save_before_a_question(ws, conn):
    with pytest.raises(KomplError):
        ChatSession(ws, conn).save_last()


def test_cli_chat_scripted(kompl, ws, conn, wiki):
    result = kompl("chat", input="When did Fleming notice the mould?\n/sources\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "September 1928" in result.stdout and "resume with" in result.stdout
    sid = conn.execute("SELECT session_id FROM chat_sessions").fetchone()[0]
    again = kompl("chat", "--session", sid, input="/save\n/quit\n")
    assert again.exit_code == 0 and "Saved as draft" in again.stdout
    missing = kompl("chat", "--session", "nope", input="/quit\n")
    assert missing.exit_code == 2
    assert ARCHIVED not in saved_plan(conn)["inputs"]["sources"]
