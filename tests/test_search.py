"""Hybrid search: what is found, what never is (archived-only pages, drafts), and how scores are made."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from kompl import db
from kompl.read import search as search_mod
from kompl.read.search import fts_query, search
from kompl.wiki import store
from kompl.wiki.store import PageWrite

ACTIVE_A, ACTIVE_B, ARCHIVED = "src-aaaaaaaaaaaa", "src-bbbbbbbbbbbb", "src-cccccccccccc"
HIDDEN_TOKEN = "zanzibarquux"  # only in the page whose sources are all archived
DRAFT_TOKEN = "draftonlytoken"
REJECTED_TOKEN = "rejectedtoken"


# --- shared builders (also imported by test_ask, test_chat, test_mcp) -----------------------

def add_source(conn, source_id, status="active", title=None, at=None):
    with db.transaction(conn):
        conn.execute(
            "INSERT INTO sources (source_id, title, title_from, source_type, input_kind, input, content_hash,"
            " original_sha256, bytes, chars, status, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (source_id, title or source_id, "given", "text", "stdin", "-", source_id, source_id, 1, 1, status,
             at or db.utcnow()))


def add_page(ws, conn, key, title, body, sources=(ACTIVE_A,), category="other"):
    page, _ = store.commit_version(ws, conn, PageWrite(
        page_key=key, page_type=key.split(":")[0], title=title, body=body,
        sources=[(s, "summary") for s in sources], author="kompl/offline", category=category))
    return page


def add_plan(conn, key, title, draft, status="drafted", sources=(ACTIVE_A,), page_type=None):
    now = db.utcnow()
    with db.transaction(conn):
        cur = conn.execute(
            "INSERT INTO page_plans (page_key, page_type, title, action, status, inputs_hash, inputs, draft, summary,"
            " model, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (key, page_type or key.split(":")[0], title, "create", status, f"h-{key}",
             json.dumps({"sources": list(sources)}), draft, "", "kompl/offline", now, now))
    return cur.lastrowid


@dataclass
class Wiki:
    fleming: dict
    penicillin: dict
    florey: dict
    hidden: dict
    mixed: dict


def build_wiki(ws, conn) -> Wiki:
    """Five pages over two active sources and one archived source, plus a draft and a rejected plan."""
    add_source(conn, ACTIVE_A, title="Fleming notes")
    add_source(conn, ACTIVE_B, title="Oxford history")
    add_source(conn, ARCHIVED, status="archived", title="Old rumour")
    fleming = add_page(ws, conn, "entity:fleming", "Alexander Fleming",
                       "Alexander Fleming was a Scottish bacteriologist.\n\n"
                       "In September 1928 he noticed that a mould killed bacteria in a culture dish [src-aaaaaaaaaaaa].",
                       category="person")
    penicillin = add_page(ws, conn, "concept:penicillin", "Penicillin",
                          "Penicillin is an antibiotic made by the Penicillium mould.\n\n"
                          "Mass production began during the Second World War [src-bbbbbbbbbbbb].",
                          sources=(ACTIVE_A, ACTIVE_B), category="concept")
    florey = add_page(ws, conn, "entity:florey", "Howard Florey",
                      "Howard Florey led the Oxford team that purified penicillin [src-bbbbbbbbbbbb].",
                      sources=(ACTIVE_B,), category="person")
    hidden = add_page(ws, conn, "entity:rumour", "Penicillin Rumour",
                      f"The {HIDDEN_TOKEN} rumour says penicillin was found in a mould on a melon [src-cccccccccccc].",
                      sources=(ARCHIVED,))
    mixed = add_page(ws, conn, "source:mixed", "Mixed Sources",
                     "A page backed by one active and one archived source about culture dishes.",
                     sources=(ACTIVE_A, ARCHIVED), category="work")
    add_plan(conn, "entity:draftpage", "Draft Page", f"A pending {DRAFT_TOKEN} draft about penicillin mould.")
    add_plan(conn, "entity:rejectedpage", "Rejected Page", f"A {REJECTED_TOKEN} draft about penicillin mould.",
             status="rejected")
    return Wiki(fleming, penicillin, florey, hidden, mixed)


@dataclass(frozen=True)
class Hit:
    page_id: int
    chunk: int
    score: float
    text: str


class FakeVectors:
    """A vector index that returns the given (page_id, score) pairs for every query, best first."""

    def __init__(self, pairs):
        self.pairs = list(pairs)
        self.queries = []

    def query(self, text, k=10):
        self.queries.append((text, k))
        return [Hit(pid, n, score, f"chunk {n} of page {pid}") for n, (pid, score) in enumerate(self.pairs)][:k]


@pytest.fixture
def wiki(ws, conn):
    return build_wiki(ws, conn)


def titles(results):
    return [h.title for h in results]


# --- the query ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '"unbalanced', "AND OR NOT", "NEAR(penicillin", "penic*", "title:fleming", "^x - + ( ) ;", "'", "",
    "body : NOT NEAR/3", "\\", "💊 penicillin",
])
def test_user_syntax_never_breaks_the_query(ws, conn, wiki, text):
    search(ws, conn, text, vector_index=False)  # no exception is the test


def test_fts_query_quotes_and_ors_the_words():
    assert fts_query('Who found "penicillin" AND NEAR(x2)?') == '"found" OR "penicillin" OR "near" OR "x2"'
    assert fts_query("the and of") == '"the" OR "and" OR "of"'  # only stop words: keep them
    assert fts_query("  ;; ") is None


# --- trust states are filters ------------------------------------------------------------------

def test_archived_only_page_is_absent_even_when_vectors_return_it(ws, conn, wiki):
    vectors = FakeVectors([(wiki.hidden["page_id"], 0.99), (wiki.penicillin["page_id"], 0.5)])
    found = search(ws, conn, f"{HIDDEN_TOKEN} penicillin melon rumour", vector_index=vectors)
    assert wiki.hidden["page_id"] not in [h.page_id for h in found]
    assert all(HIDDEN_TOKEN not in h.snippet for h in found)
    assert search(ws, conn, HIDDEN_TOKEN, vector_index=False).hits == []


def test_include_archived_shows_archived_only_pages_marked(ws, conn, wiki):
    found = search(ws, conn, HIDDEN_TOKEN, vector_index=False, include_archived=True)
    assert [h.page_id for h in found] == [wiki.hidden["page_id"]]
    assert found.hits[0].archived


def test_page_with_one_active_source_stays_visible(ws, conn, wiki):
    assert "Mixed Sources" in titles(search(ws, conn, "culture dishes", vector_index=False))


def test_drafts_absent_unless_asked_and_rejected_never(ws, conn, wiki):
    assert search(ws, conn, DRAFT_TOKEN, vector_index=False).hits == []
    found = search(ws, conn, f"{DRAFT_TOKEN} {REJECTED_TOKEN}", vector_index=False, include_drafts=True)
    assert titles(found) == ["Draft Page"]
    assert found.hits[0].draft and found.hits[0].plan_id and found.hits[0].page_id is None
    assert search(ws, conn, REJECTED_TOKEN, vector_index=False, include_drafts=True, include_archived=True).hits == []


def test_draft_of_archived_sources_needs_include_archived(ws, conn, wiki):
    add_plan(conn, "entity:olddraft", "Old Draft", "An oldrumourdraft text.", sources=(ARCHIVED,))
    assert search(ws, conn, "oldrumourdraft", vector_index=False, include_drafts=True).hits == []
    assert titles(search(ws, conn, "oldrumourdraft", vector_index=False, include_drafts=True,
                         include_archived=True)) == ["Old Draft"]


def test_source_archived_after_commit_hides_the_page(ws, conn, wiki):
    assert "Howard Florey" in titles(search(ws, conn, "Oxford team", vector_index=False))
    with db.transaction(conn):
        conn.execute("UPDATE sources SET status = 'archived' WHERE source_id = ?", (ACTIVE_B,))
    found = search(ws, conn, "Oxford team purified", vector_index=False)
    assert "Howard Florey" not in titles(found)
    assert "Penicillin" in titles(search(ws, conn, "penicillin antibiotic", vector_index=False))  # still has A


# --- ranking and scores --------------------------------------------------------------------------

def test_fusion_rewards_pages_found_by_both_legs(ws, conn, wiki):
    # Full text ranks Fleming first for "mould culture"; vectors put Penicillin first.
    vectors = FakeVectors([(wiki.penicillin["page_id"], 0.9), (wiki.florey["page_id"], 0.8)])
    found = search(ws, conn, "mould", vector_index=vectors)
    top = found.hits[0]
    assert top.page_id == wiki.penicillin["page_id"]
    assert top.scores["fts_rank"] and top.scores["vector_rank"] == 1
    florey = next(h for h in found if h.page_id == wiki.florey["page_id"])  # vector-only hit
    assert florey.scores["fts_rank"] is None and florey.scores["vector"] == 0.8
    for hit in found:
        s = hit.scores
        assert hit.score == pytest.approx(s["rrf"] + s["sources"] + s["recency"], abs=1e-5)


def test_best_chunk_per_page(ws, conn, wiki):
    pid = wiki.florey["page_id"]
    vectors = FakeVectors([(pid, 0.4), (pid, 0.7), (wiki.fleming["page_id"], 0.6)])
    found = search(ws, conn, "nothingmatcheshere", vector_index=vectors, mode="vector")
    assert [h.page_id for h in found] == [pid, wiki.fleming["page_id"]]
    assert found.hits[0].scores["vector"] == 0.7


def test_more_sources_break_ties(ws, conn):
    add_source(conn, ACTIVE_A)
    add_source(conn, ACTIVE_B)
    one = add_page(ws, conn, "entity:one", "Tie One", "tietoken")
    two = add_page(ws, conn, "entity:two", "Tie Two", "tietoken", sources=(ACTIVE_A, ACTIVE_B))
    vectors = FakeVectors([(one["page_id"], 0.5), (two["page_id"], 0.5)])
    found = search(ws, conn, "tietoken", vector_index=vectors, mode="vector")
    assert found.hits[0].scores["sources"] > found.hits[1].scores["sources"]
    assert found.hits[0].page_id == two["page_id"]


def test_filters_and_limit(ws, conn, wiki):
    assert set(titles(search(ws, conn, "penicillin mould oxford", page_type="entity", vector_index=False))) <= {
        "Alexander Fleming", "Howard Florey"}
    assert titles(search(ws, conn, "penicillin mould oxford", category="concept", vector_index=False)) == ["Penicillin"]
    assert len(search(ws, conn, "penicillin mould oxford bacteria", limit=1, vector_index=False)) == 1


def test_failing_vector_index_keeps_full_text_and_says_so(ws, conn, wiki):
    class Broken:
        def query(self, text, k=10):
            raise RuntimeError("store damaged")

    found = search(ws, conn, "Fleming", vector_index=Broken())
    assert "Alexander Fleming" in titles(found)
    assert any("store damaged" in n for n in found.notes)


def test_missing_vector_module_is_a_note(ws, conn, wiki, monkeypatch):
    monkeypatch.setattr(search_mod, "open_vector_index", lambda ws: (None, "vector search unavailable"))
    found = search(ws, conn, "Fleming")
    assert "Alexander Fleming" in titles(found) and found.notes == ["vector search unavailable"]


def test_real_vector_index_never_returns_archived_only_pages(ws, conn, wiki):
    vectors = pytest.importorskip("kompl.vectors")
    all_ids = [r[0] for r in conn.execute("SELECT page_id FROM pages")]
    vectors.sync_pages(ws, conn, all_ids)
    found = search(ws, conn, f"{HIDDEN_TOKEN} rumour melon", mode="vector")
    assert found.hits and wiki.hidden["page_id"] not in [h.page_id for h in found]
    hybrid = search(ws, conn, "Oxford team purified penicillin")
    assert hybrid.hits[0].title == "Howard Florey" and hybrid.hits[0].scores["vector_rank"]


# --- the CLI ----------------------------------------------------------------------------------------

def test_cli_json_contract(kompl, ws, conn, wiki):
    result = kompl("search", "penicillin", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows and {"page_id", "title", "score", "scores"} <= set(rows[0])
    assert "Penicillin Rumour" not in [r["title"] for r in rows]
    assert {"rrf", "fts_rank", "vector_rank", "sources", "recency"} <= set(rows[0]["scores"])


def test_cli_explain_and_flags(kompl, ws, conn, wiki):
    result = kompl("search", "penicillin", "--explain", "--include-drafts", "--limit", "20")
    assert result.exit_code == 0
    assert "rrf=" in result.stdout and "[draft]" in result.stdout
    archived = kompl("search", HIDDEN_TOKEN, "--include-archived", "--json")
    assert [r["title"] for r in json.loads(archived.stdout)] == ["Penicillin Rumour"]
