"""Ask: the context budget never evicts the question, pages are clipped to relevant passages,
citations are checked, archived-only pages and drafts are never used, wiki questions skip the model."""

from __future__ import annotations

import json

import pytest
from test_search import (
    ACTIVE_A,
    DRAFT_TOKEN,
    HIDDEN_TOKEN,
    add_page,
    add_source,
    build_wiki,
)

from kompl import prompts
from kompl.read import ask as ask_mod
from kompl.read.ask import AnswerResult, ask
from kompl.text import approx_tokens


class FakeGateway:
    """Renders the prompt exactly as the gateway does, records it, and replies with a canned answer."""

    model = "fake/model"
    offline = False

    def __init__(self, reply=None, context_tokens=None):
        self.reply = reply or (lambda task: {"answer": "An answer.", "citations": [], "model": "fake/model"})
        self.context_tokens = context_tokens
        self.tasks, self.rendered = [], []

    def run(self, task):
        system, user, _ = prompts.render(task.prompt, task.variables)
        system = f"{system}\n\n{prompts.json_instruction(task.schema.model_json_schema())}"
        self.tasks.append(task)
        self.rendered.append((system, user))
        task.call_id = 42
        return task.schema.model_validate(self.reply(task))


@pytest.fixture
def wiki(ws, conn):
    return build_wiki(ws, conn)


def llm_calls(conn):
    return conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0]


# --- citations ----------------------------------------------------------------------------------

def test_invalid_citations_are_removed_and_reported(ws, conn, wiki):
    def reply(task):
        given = task.variables["pages"][0]["page_id"]
        return {"answer": f"Fleming saw it in 1928 [page:{given}]. Also a made-up fact [page:9999].",
                "citations": [{"page_id": given, "title": "whatever"}, {"page_id": 9999, "title": "Invented"}],
                "model": "fake/model"}

    gw = FakeGateway(reply)
    result = ask(ws, conn, "When did Fleming see the mould?", gateway=gw, vector_index=False)
    given = [p["page_id"] for p in gw.tasks[0].variables["pages"]]
    assert [c["page_id"] for c in result.citations] == [given[0]]
    assert result.citations[0]["title"] != "whatever"  # the title comes from the wiki, not the model
    assert [c["page_id"] for c in result.removed_citations] == [9999]
    assert "[page:9999]" not in result.answer and f"[page:{given[0]}]" in result.answer


def test_citation_of_an_existing_page_not_given_is_removed(ws, conn, wiki):
    florey = wiki.florey["page_id"]  # exists, but "culture dish 1928" does not retrieve it
    gw = FakeGateway(lambda task: {"answer": f"x [page:{florey}]", "citations": [{"page_id": florey, "title": "H"}]})
    result = ask(ws, conn, "Which bacteriologist noticed the culture dish in 1928?", gateway=gw, limit=1,
                 vector_index=False)
    assert florey not in [p["page_id"] for p in result.pages_used]
    assert result.citations == [] and [c["page_id"] for c in result.removed_citations] == [florey]


# --- budget: the question is never evicted ---------------------------------------------------------

def test_long_page_is_clipped_to_its_relevant_passage_not_a_prefix(ws, conn):
    add_source(conn, ACTIVE_A)
    filler = [f"Paragraph {n} is about routine laboratory bookkeeping and glassware." for n in range(300)]
    filler[217] = "Streptomycin was isolated by Albert Schatz in 1943 in the Waksman laboratory."
    page = add_page(ws, conn, "entity:lab", "Laboratory Records", "\n\n".join(filler))
    gw = FakeGateway(context_tokens=1500)
    question = "Who isolated streptomycin?"
    result = ask(ws, conn, question, gateway=gw, vector_index=False)
    system, user = gw.rendered[0]
    assert approx_tokens(system) + approx_tokens(user) <= 1500
    assert question in user and user.rstrip().endswith(json.dumps(question))
    passages = gw.tasks[0].variables["pages"][0]["passages"]
    assert any("Streptomycin was isolated" in p for p in passages)
    assert "Paragraph 5 " not in user  # not a prefix cut: the opening paragraph, then what is relevant
    assert "…" in passages
    assert any(page["title"] in item["what"] for item in result.left_out)


def test_very_long_history_keeps_latest_turns_and_the_question(ws, conn, wiki):
    turns = []
    for n in range(400):
        turns.append({"role": "user", "content": f"old question number {n} " + "padding " * 30})
        turns.append({"role": "assistant", "content": f"old answer number {n} " + "padding " * 30})
    gw = FakeGateway(context_tokens=3000)
    question = "And what did Howard Florey do at Oxford?"
    result = ask(ws, conn, question, gateway=gw, history=turns, vector_index=False)
    system, user = gw.rendered[0]
    history = gw.tasks[0].variables["history"]
    assert history and history[-1]["content"].startswith("old answer number 399")
    assert history[-2]["content"].startswith("old question number 399")
    assert "old question number 0 " not in user
    numbers = [int(t["content"].split()[3]) for t in history]
    assert numbers == sorted(numbers)  # in order, oldest kept first
    assert user.rstrip().endswith(json.dumps(question))
    assert approx_tokens(system) + approx_tokens(user) <= 3000
    assert any("oldest" in item["what"] for item in result.left_out)
    assert gw.tasks[0].variables["pages"]  # history did not take the pages' room


def test_question_survives_a_budget_smaller_than_itself(ws, conn, wiki):
    question = "Tell me about penicillin" + " and its history" * 400
    gw = FakeGateway(context_tokens=500)
    result = ask(ws, conn, question, gateway=gw, history=[{"role": "user", "content": "hi"}], vector_index=False)
    _system, user = gw.rendered[0]
    assert json.dumps(question) in user
    assert gw.tasks[0].variables["pages"] == [] and gw.tasks[0].variables["history"] == []
    assert result.left_out and "question" in result.left_out[0]["why"]


def test_budget_is_checked_against_the_rendered_prompt(ws, conn):
    add_source(conn, ACTIVE_A)
    # Quotes and newlines grow when JSON-escaped: estimates per passage run low.
    body = "\n\n".join('"quoted" \\ "text" about penicillin \\ "x"\n' * 8 for _ in range(60))
    add_page(ws, conn, "entity:q", "Quoted", body)
    gw = FakeGateway(context_tokens=1200)
    ask(ws, conn, "penicillin quoted text", gateway=gw, vector_index=False)
    system, user = gw.rendered[0]
    assert approx_tokens(system) + approx_tokens(user) <= 1200


# --- trust states ---------------------------------------------------------------------------------

def test_archived_only_page_never_reaches_the_model(ws, conn, wiki):
    gw = FakeGateway()
    ask(ws, conn, f"What does the {HIDDEN_TOKEN} rumour say about the melon?", gateway=gw, vector_index=False)
    for system, user in gw.rendered:
        assert HIDDEN_TOKEN not in user
    offline = ask(ws, conn, f"{HIDDEN_TOKEN} melon?", vector_index=False)
    assert HIDDEN_TOKEN not in offline.answer and offline.citations == []


def test_drafts_never_reach_the_model(ws, conn, wiki):
    gw = FakeGateway()
    ask(ws, conn, f"What is the {DRAFT_TOKEN} about penicillin mould?", gateway=gw, vector_index=False)
    assert all(DRAFT_TOKEN not in json.dumps(t.variables["pages"]) for t in gw.tasks)


# --- the offline model ------------------------------------------------------------------------------

def test_offline_answer_is_extractive_and_cited(ws, conn, wiki):
    result = ask(ws, conn, "When did Fleming notice the mould killing bacteria?", vector_index=False)
    assert "September 1928" in result.answer
    assert wiki.fleming["page_id"] in [c["page_id"] for c in result.citations]
    assert result.model.startswith("kompl/offline") and result.removed_citations == []
    row = conn.execute("SELECT purpose, outcome FROM llm_calls ORDER BY id DESC LIMIT 1").fetchone()
    assert tuple(row) == ("answer", "ok")


def test_offline_says_when_nothing_relevant(ws, conn, wiki):
    from kompl.offline.answer import NOTHING_FOUND, answer

    out = answer({"question": "Who won the 1966 football world cup?",
                  "pages": [{"page_id": 1, "title": "Penicillin", "passages": ["Penicillin is an antibiotic."]}]},
                 AnswerResult)
    assert out == {"answer": NOTHING_FOUND, "citations": []}


def test_nothing_retrieved_means_no_model_call(ws, conn, wiki):
    before = llm_calls(conn)
    result = ask(ws, conn, "xylophonequark", vector_index=False)
    assert result.citations == [] and "nothing" in result.answer.lower()
    assert llm_calls(conn) == before


# --- questions about the wiki itself ---------------------------------------------------------------

@pytest.mark.parametrize("question, expect", [
    ("How many sources are there?", "2 active source(s), 1 archived"),
    ("how many pages?", "4 page(s)"),
    ("What did I add last?", "Oxford history"),
    ("how many drafts are pending", "1 draft(s)"),
])
def test_wiki_questions_are_answered_from_the_database(ws, conn, wiki, question, expect):
    before = llm_calls(conn)
    result = ask(ws, conn, question, gateway=FakeGateway(), vector_index=False)
    assert expect in result.answer and result.from_database
    assert llm_calls(conn) == before


def test_a_question_about_content_is_not_a_wiki_question(conn, wiki):
    assert ask_mod.answer_from_database(conn, "How many sources mention penicillin?") is None


# --- the CLI -----------------------------------------------------------------------------------------

def test_cli_json_contract(kompl, ws, conn, wiki):
    result = kompl("ask", "When did Fleming notice the mould?", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"answer", "citations", "pages_used", "removed_citations", "model"} <= set(data)
    assert data["citations"] and {"page_id", "title"} <= set(data["citations"][0])
    plain = kompl("ask", "how many sources")
    assert plain.exit_code == 0 and "2 active source(s)" in plain.stdout


def test_cli_empty_question_is_an_error(kompl, ws):
    result = kompl("ask", "  ")
    assert result.exit_code == 2 and "empty" in result.output
