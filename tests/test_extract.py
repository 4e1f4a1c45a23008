"""`kompl extract`: local + model pass, chunking, storage, idempotence, failures, archived sources."""

from __future__ import annotations

import json

import pytest

from kompl import db, nlp
from kompl.ingest import store
from kompl.llm import Gateway, LLMError, ModelCallError
from kompl.pipeline import extract as ex
from kompl.text import norm_name

FIRST_PERSON = "Zorbek Quillfeather"
LAST_ORG = "Vantrellix Corporation"

ARTICLE = """# Harbour deal

Maribel Ostrowska, chief executive of Kelderane Shipping, said on Monday that the company had bought
Pellucid Ferries for $120 million. Kelderane Shipping acquired Pellucid Ferries after regulators in
Norway approved the sale in June 2023.

Ostrowska told reporters that ferry routes are a steady business. Container shipping is the
transport of goods in standard containers, and container shipping prices fell sharply last year.
"""

SECOND = """# Rugby final

The Harlequins beat the Saracens in London on Saturday. Coach Tomas Velaruzzi said the Harlequins
had trained for the final for months. Ticket prices rose by 20 percent, according to the league.
"""


def _ingest(kompl, tmp_path, name: str, text: str) -> str:
    """Store a markdown source through the source store (the ingest service's last step)."""
    import hashlib

    from kompl import db as kdb
    from kompl.workspace import find_workspace

    ws = find_workspace(kompl.home)
    conn = kdb.connect(ws.db_path)
    try:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        new = store.NewSource(
            title=text.splitlines()[0].lstrip("# ").strip(), title_from="heading", source_type="markdown",
            input_kind="file", input=str(tmp_path / name), markdown=text, content_hash=digest,
            original=text.encode("utf-8"), original_sha256=digest, original_ext=".md",
        )
        with store.ingest_lock(ws):
            row, _ = store.store(ws, conn, new)
        return row["source_id"]
    finally:
        conn.close()


def _calls(conn) -> int:
    return conn.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'extract'").fetchone()[0]


@pytest.fixture(scope="module", autouse=True)
def spacy_loaded():
    nlp.load_pipeline()


def test_extract_stores_mentions_claims_and_relationships(ws, conn, kompl, tmp_path):
    sid = _ingest(kompl, tmp_path, "article.md", ARTICLE)
    report = ex.extract_pending(ws, conn)
    assert report.ok and [e["source_id"] for e in report.extracted] == [sid]
    assert report.model == "kompl/offline" and report.pipeline["name"]
    text = store.read_markdown(ws, sid)

    row = ex.get_extraction(conn, sid)
    assert row["extractor_version"] == ex.EXTRACTOR_VERSION and row["model"] == "kompl/offline"
    assert row["content_hash"] == store.get(conn, sid)["content_hash"] and row["chunks"] == 1
    assert row["result"]["model"].startswith("kompl/offline")
    assert row["local"]["profile"]["words"] > 50 and row["local"]["profile"]["entity_density"] > 0
    assert row["local"]["keyphrases"] and row["local"]["pipeline"]["name"] == report.pipeline["name"]

    mentions = {(r["norm"], r["kind"]): dict(r) for r in conn.execute("SELECT * FROM entity_mentions WHERE source_id = ?", (sid,))}
    assert mentions[(norm_name("Maribel Ostrowska"), "entity")]["type"] == "PERSON"
    assert mentions[(norm_name("Maribel Ostrowska"), "entity")]["count"] >= 2  # "Ostrowska told ..."
    assert (norm_name("Kelderane Shipping"), "entity") in mentions
    assert (norm_name("Pellucid Ferries"), "entity") in mentions
    assert ("ferry", "entity") not in mentions and ("business", "entity") not in mentions
    assert any(kind == "concept" for _, kind in mentions)
    assert all(m["context"] for m in mentions.values())

    claims = conn.execute("SELECT claim, quote, quote_start, confidence, entities FROM claims WHERE source_id = ?", (sid,)).fetchall()
    assert claims
    for claim in claims:
        assert claim["quote"] in text  # verbatim from the source
        assert text[claim["quote_start"]:].startswith(claim["quote"])
        assert 0 <= claim["confidence"] <= 1 and isinstance(json.loads(claim["entities"]), list)

    rels = {(norm_name(r[0]), r[2], norm_name(r[1])) for r in conn.execute(
        "SELECT from_name, to_name, type FROM relationship_mentions WHERE source_id = ?", (sid,))}
    assert (norm_name("Maribel Ostrowska"), "works_for", norm_name("Kelderane Shipping")) in rels
    assert (norm_name("Kelderane Shipping"), "acquired", norm_name("Pellucid Ferries")) in rels

    audit = db.activity(conn, action="extract")
    assert [a["target"] for a in audit] == [sid] and audit[0]["details"]["model"] == "kompl/offline"


def test_rerun_costs_zero_model_calls(ws, conn, kompl, tmp_path):
    _ingest(kompl, tmp_path, "a.md", ARTICLE)
    _ingest(kompl, tmp_path, "b.md", SECOND)
    first = ex.extract_pending(ws, conn)
    assert len(first.extracted) == 2 and first.model_calls == 2 and _calls(conn) == 2
    again = ex.extract_pending(ws, conn)
    assert again.extracted == [] and again.up_to_date == 2 and again.model_calls == 0
    assert _calls(conn) == 2
    # A different model or a forced run makes them pending again.
    todo, up_to_date, _ = ex.pending_sources(conn, "openai/gpt-4o-mini")
    assert len(todo) == 2 and up_to_date == 0
    forced = ex.extract_pending(ws, conn, force=True)
    assert len(forced.extracted) == 2 and _calls(conn) == 4
    assert len(db.activity(conn, action="extract")) == 4


def test_replacing_keeps_one_set_of_rows(ws, conn, kompl, tmp_path):
    sid = _ingest(kompl, tmp_path, "a.md", ARTICLE)
    ex.extract_pending(ws, conn)
    counts = [conn.execute(f"SELECT COUNT(*) FROM {t} WHERE source_id = ?", (sid,)).fetchone()[0]
              for t in ("entity_mentions", "claims", "relationship_mentions")]
    ex.extract_pending(ws, conn, force=True)
    again = [conn.execute(f"SELECT COUNT(*) FROM {t} WHERE source_id = ?", (sid,)).fetchone()[0]
             for t in ("entity_mentions", "claims", "relationship_mentions")]
    assert counts == again and counts[0] > 0


def test_term_df_follows_extractions(ws, conn, kompl, tmp_path):
    a = _ingest(kompl, tmp_path, "a.md", ARTICLE)
    _ingest(kompl, tmp_path, "b.md", SECOND)
    ex.extract_pending(ws, conn)
    ex.extract_pending(ws, conn, force=True)  # re-extraction must not count a source twice

    def expected() -> dict:
        df: dict = {}
        for (local,) in conn.execute("SELECT local FROM extractions"):
            for term in json.loads(local)["terms"]:
                df[term] = df.get(term, 0) + 1
        return df

    actual = dict(conn.execute("SELECT term, df FROM term_df").fetchall())
    assert actual == expected() and actual
    with db.transaction(conn):
        conn.execute("DELETE FROM extractions WHERE source_id = ?", (a,))
    assert dict(conn.execute("SELECT term, df FROM term_df").fetchall()) == expected()


def test_archived_sources_are_not_extracted(ws, conn, kompl, tmp_path):
    keep = _ingest(kompl, tmp_path, "a.md", ARTICLE)
    gone = _ingest(kompl, tmp_path, "b.md", SECOND)
    with db.transaction(conn):  # test setup: archive one source
        conn.execute("UPDATE sources SET status = 'archived' WHERE source_id = ?", (gone,))
    report = ex.extract_pending(ws, conn)
    assert [e["source_id"] for e in report.extracted] == [keep]
    assert ex.get_extraction(conn, gone) is None
    named = ex.extract_pending(ws, conn, source_ids=[gone, "src-nope"])
    assert named.extracted == [] and {s["source_id"] for s in named.skipped} == {gone, "src-nope"}
    assert _calls(conn) == 1


def test_source_option_limits_the_run(ws, conn, kompl, tmp_path):
    a = _ingest(kompl, tmp_path, "a.md", ARTICLE)
    b = _ingest(kompl, tmp_path, "b.md", SECOND)
    report = ex.extract_pending(ws, conn, source_ids=[b])
    assert [e["source_id"] for e in report.extracted] == [b]
    assert ex.get_extraction(conn, a) is None


def _long_text() -> str:
    filler = ("The committee reviewed the quarterly figures and discussed the budget for the coming "
              "season in considerable detail before adjourning. ")
    paragraphs = [f"# Annual report\n\n{FIRST_PERSON}, chief executive of Brindlewick Holdings, opened the meeting."]
    paragraphs += [filler * 3 for _ in range(12)]
    paragraphs.append(f"In closing, the board thanked {LAST_ORG} for its long support of the programme.")
    return "\n\n".join(paragraphs) + "\n"


def test_long_source_is_chunked_and_merged(ws, conn, kompl, tmp_path):
    text = _long_text()
    sid = _ingest(kompl, tmp_path, "long.md", text)
    report = ex.extract_pending(ws, conn, chunk_tokens=150)  # ~600 characters per call
    assert report.ok
    row = ex.get_extraction(conn, sid)
    assert row["chunks"] > 3 and row["chunks"] == _calls(conn) == report.model_calls
    norms = {r[0] for r in conn.execute("SELECT norm FROM entity_mentions WHERE source_id = ? AND kind = 'entity'", (sid,))}
    assert norm_name(FIRST_PERSON) in norms  # from the first chunk
    assert norm_name(LAST_ORG) in norms or "vantrellix" in norms  # from the last chunk
    # The filler sentence recurs in every chunk, and overlaps repeat sentences: each quote is stored once.
    quotes = [r[0] for r in conn.execute("SELECT quote FROM claims WHERE source_id = ?", (sid,))]
    assert len(quotes) == len(set(quotes))
    # Chunk tasks recorded with their source.
    metas = [json.loads(r[0]) for r in conn.execute("SELECT meta FROM llm_calls WHERE purpose = 'extract'")]
    assert {m.get("source_id") for m in metas} == {sid}


def test_chunk_text_covers_everything_with_overlap():
    text = _long_text()
    chunks = ex.chunk_text(text, 600)
    assert len(chunks) > 3 and chunks[0].start == 0 and chunks[-1].end == len(text)
    for prev, cur in zip(chunks, chunks[1:]):
        assert cur.start <= prev.end  # no gap
        assert cur.overlap == prev.end - cur.start >= 0
        assert cur.start > prev.start  # progress
    assert all(c.end - c.start <= 600 for c in chunks)
    assert any(c.overlap > 0 for c in chunks)
    # One huge paragraph without sentence ends is still cut, at spaces.
    blob = "word " * 2000
    parts = ex.chunk_text(blob, 500, 0)
    assert "".join(blob[c.start:c.end] for c in parts) == blob
    assert ex.chunk_text("short", 500) == [ex.Chunk(0, 5, 0)]


def test_merge_sums_counts_and_dedupes_claims():
    a = ex.ExtractionResult.model_validate({
        "title": "T", "summary": "One.", "entities": [
            {"name": "Sam Bankman-Fried", "type": "PERSON", "mentions": 2, "context": "c1"},
            {"name": "FTX", "type": "ORG", "mentions": 3}],
        "claims": [{"claim": "x", "quote": "FTX collapsed.", "confidence": 0.4, "entities_involved": ["FTX"]}],
        "relationships": [{"from": "Sam Bankman-Fried", "to": "FTX", "type": "founded"}],
    })
    b = ex.ExtractionResult.model_validate({
        "summary": "Two.", "entities": [
            {"name": "Bankman-Fried", "type": "PERSON", "mentions": 4},
            {"name": "ftx", "type": "org", "mentions": 1}],
        "claims": [{"claim": "x again", "quote": "FTX  collapsed.", "confidence": 0.7, "entities_involved": ["Alameda"]}],
        "relationships": [{"from": "sam bankman-fried", "to": "FTX", "type": "founded"}],
    })
    merged = ex.merge_results([a, b])
    entities = {e.name: e for e in merged.entities}
    assert entities["Sam Bankman-Fried"].mentions == 6 and entities["FTX"].mentions == 4
    assert entities["FTX"].type == "ORG" and "Bankman-Fried" not in entities
    assert len(merged.claims) == 1 and merged.claims[0].confidence == 0.7
    assert merged.claims[0].entities_involved == ["FTX", "Alameda"]
    assert len(merged.relationships) == 1 and merged.summary == "One. Two." and merged.title == "T"
    assert merged.to_json()["relationships"][0]["from"] == "Sam Bankman-Fried"


class _FailingGateway(Gateway):
    """The real gateway, except that chunks of one source fail like a provider error would."""

    def __init__(self, ws, conn, fail_source):
        super().__init__(ws, conn)
        self.fail_source = fail_source

    def run_many(self, tasks):
        results = super().run_many([t for t in tasks if t.meta["source_id"] != self.fail_source])
        it = iter(results)
        return [ModelCallError("provider said 503") if t.meta["source_id"] == self.fail_source else next(it)
                for t in tasks]


def test_failed_model_call_leaves_source_pending(ws, conn, kompl, tmp_path):
    good = _ingest(kompl, tmp_path, "a.md", ARTICLE)
    bad = _ingest(kompl, tmp_path, "b.md", SECOND)
    report = ex.extract_pending(ws, conn, gateway=_FailingGateway(ws, conn, bad))
    assert not report.ok
    assert [f["source_id"] for f in report.failed] == [bad] and "503" in report.failed[0]["error"]
    assert [e["source_id"] for e in report.extracted] == [good]
    assert ex.get_extraction(conn, bad) is None
    assert conn.execute("SELECT COUNT(*) FROM claims WHERE source_id = ?", (bad,)).fetchone()[0] == 0
    retry = ex.extract_pending(ws, conn)
    assert [e["source_id"] for e in retry.extracted] == [bad] and retry.up_to_date == 1


def test_extraction_result_accepts_llm_style_json():
    data = {"title": "x", "entities": None, "relationships": [{"from": "A", "to": "B"}], "claims": [{"claim": "c"}]}
    result = ex.ExtractionResult.model_validate(data)
    assert result.entities == [] and result.relationships[0].from_ == "A" and result.claims[0].confidence == 0.5
    assert LLMError  # the gateway's error type is what run_many hands back


def test_cli_extract_json_and_exit_codes(kompl, tmp_path):
    _ingest(kompl, tmp_path, "a.md", ARTICLE)
    result = kompl("extract", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["extracted"]) == 1 and data["model_calls"] == 1 and data["failed"] == []
    again = kompl("extract")
    assert again.exit_code == 0 and "0 extracted, 1 up to date" in again.output
    assert "extract" in kompl("--help").output
