"""The offline model: contracts of each purpose, determinism, planted-token vectors, both NLP pipelines."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from kompl import nlp, offline
from kompl.pipeline.extract import ExtractionResult
from kompl.text import norm_name

# Planted tokens: made-up names no model has seen, and words that must not become entities.
PERSON = "Zorbek Quillfeather"
ORG = "Vantrellix Corporation"
OTHER_ORG = "Quorbit Labs"
NOT_ENTITIES = ("marmalade", "Yesterday")

TEXT = f"""---
title: "Vantrellix buys Quorbit"
url: "https://example.org/vantrellix-quorbit"
---

# Vantrellix buys Quorbit Labs

Yesterday, {PERSON}, chief executive of {ORG}, said the company had agreed to pay $41 million for {OTHER_ORG}.
{ORG} acquired {OTHER_ORG} after a long auction in March 2023, according to a filing in London.

The deal makes {ORG} the largest maker of marmalade robots in Europe. Quillfeather told reporters
that marmalade robots are a niche market and that the company expects revenue to double by 2025.

Marmalade robots are kitchen machines that sort fruit peel. {PERSON} founded the company in 2011
with {OTHER_ORG} as its first customer. Sign up for our newsletter to read more.
"""


@pytest.fixture(scope="module")
def spacy_loaded():
    """Load the spaCy pipeline once for the module."""
    nlp.load_pipeline()
    return nlp.pipeline_info()


def _extract(text: str = TEXT, hints: dict | None = None) -> dict:
    return offline.respond("extract", {"title": "Vantrellix buys Quorbit", "text": text, "hints": hints or {}},
                           ExtractionResult)


def test_extract_contract_and_model_name(spacy_loaded):
    out = _extract()
    result = ExtractionResult.model_validate(out)
    assert result.model.startswith("kompl/offline") and spacy_loaded.name in result.model
    assert result.title == "Vantrellix buys Quorbit"
    assert result.summary and result.summary.split(". ")[0] in " ".join(TEXT.split())
    # Relationship keys are "from"/"to" in the JSON.
    assert all("from" in r and "to" in r for r in out["relationships"])
    for claim in result.claims:
        assert claim.quote and claim.quote in TEXT, claim.quote  # verbatim
        assert 0 <= claim.confidence <= 1
    assert result.contradictions == []


def test_extract_planted_tokens(spacy_loaded):
    result = ExtractionResult.model_validate(_extract())
    names = {norm_name(e.name): e for e in result.entities}
    assert norm_name(PERSON) in names and names[norm_name(PERSON)].type == "PERSON"
    assert norm_name(ORG) in names or norm_name("Vantrellix") in names
    assert norm_name(OTHER_ORG) in names
    for word in NOT_ENTITIES:
        assert norm_name(word) not in names
    # The lone surname is counted with the full name.
    assert names[norm_name(PERSON)].mentions >= 3
    assert "quillfeather" not in names
    # Boilerplate is not a claim.
    assert not any("newsletter" in c.claim for c in result.claims)


def test_extract_claims_ranked_and_relationships(spacy_loaded):
    result = ExtractionResult.model_validate(_extract())
    assert result.claims, "informative sentences become claims"
    confidences = [c.confidence for c in result.claims]
    assert confidences == sorted(confidences, reverse=True)
    top = result.claims[0]
    assert top.entities_involved
    rels = {(norm_name(r.from_), r.type, norm_name(r.to)) for r in result.relationships}
    assert (norm_name(PERSON), "works_for", norm_name(ORG)) in rels
    assert any(t == "acquired" and f.startswith("vantrellix") and o == norm_name(OTHER_ORG) for f, t, o in rels)


def test_extract_concepts_have_descriptions(spacy_loaded):
    result = ExtractionResult.model_validate(_extract())
    concepts = {c.name.lower(): c for c in result.concepts}
    assert any("robot" in name for name in concepts)
    assert all(c.description for c in result.concepts)


def test_extract_is_deterministic(spacy_loaded):
    first = _extract()
    nlp.reset()  # parse again from scratch: same answer, not just the cache
    assert _extract() == first


def test_extract_overlap_is_not_counted_twice(spacy_loaded):
    cut = TEXT.index("The deal makes")
    counted = ExtractionResult.model_validate(_extract(hints={"overlap_chars": cut}))
    names = {norm_name(e.name): e.mentions for e in counted.entities}
    full = {norm_name(e.name): e.mentions for e in ExtractionResult.model_validate(_extract()).entities}
    assert names[norm_name(PERSON)] < full[norm_name(PERSON)]


def test_extract_empty_text(spacy_loaded):
    result = ExtractionResult.model_validate(_extract(text=""))
    assert result.entities == [] and result.claims == []


def test_rule_based_pipeline_without_model(monkeypatch):
    """No spaCy model installed: a blank pipeline with rules still finds people and organisations."""
    monkeypatch.setenv(nlp.ENV_OVERRIDE, "rules")
    nlp.reset()
    try:
        info = nlp.pipeline_info()
        assert info.fallback and info.name == nlp.FALLBACK_NAME
        notice = nlp.fallback_notice()
        assert notice and "pip install 'kompl[nlp]'" in notice
        result = ExtractionResult.model_validate(_extract())
        assert nlp.FALLBACK_NAME in result.model
        names = {norm_name(e.name): e.type for e in result.entities}
        assert names.get(norm_name(PERSON)) == "PERSON"
        assert names.get(norm_name(ORG)) == "ORG"
        assert names.get("london") == "GPE"
        for word in NOT_ENTITIES:
            assert norm_name(word) not in names
        assert all(c.quote in TEXT for c in result.claims)
    finally:
        monkeypatch.delenv(nlp.ENV_OVERRIDE)
        nlp.reset()
    assert not nlp.pipeline_info().fallback or nlp.installed_model() is None


def test_mask_markdown_keeps_offsets():
    text = "# Title\n\nSee [the report](https://x.org/a) and **bold** text.\n"
    masked = nlp.mask_markdown(text)
    assert len(masked) == len(text)
    assert "https" not in masked and "the report" in masked and "**" not in masked
    assert masked.index("the report") == text.index("the report")


# --- disambiguate ----------------------------------------------------------------------------

def _pair(a, ta, b, tb, ca="", cb=""):
    return {"a": {"name": a, "type": ta, "context": ca}, "b": {"name": b, "type": tb, "context": cb}}


def test_disambiguate_rules_in_order():
    pairs = [
        _pair("FBI", "ORG", "Federal Bureau of Investigation", "ORG"),
        _pair("Bankman-Fried", "PERSON", "Sam Bankman-Fried", "PERSON"),
        _pair("GPT-3", "PRODUCT", "GPT-4", "PRODUCT"),
        _pair("Python 2", "PRODUCT", "Python 3", "PRODUCT"),
        _pair("Jordan", "PERSON", "Jordan", "GPE"),
        _pair("SBF", "PERSON", "Sam Bankman-Fried", "PERSON"),
        _pair("Apple", "ORG", "Microsoft", "ORG"),
        _pair("the F.B.I.", "ORG", "The FBI", "ORG"),
    ]
    out = offline.respond("disambiguate", {"pairs": pairs}, offline.DisambiguationResult)
    same = [d["same"] for d in out["decisions"]]
    assert same == [True, True, False, False, False, True, False, True]
    assert len(out["decisions"]) == len(pairs)
    assert all(0 <= d["confidence"] <= 1 and d["reason"] for d in out["decisions"])
    assert out["model"].startswith("kompl/offline")


def test_disambiguate_context_tiebreak_and_schema_without_model_field():
    class Decision(BaseModel):
        same: bool
        confidence: float
        reason: str = ""

    class Result(BaseModel):  # the resolver's own contract has no model field
        decisions: list[Decision]

    related = _pair("Bank", "ORG", "Bank of Springfield", "ORG",
                    "The bank raised its lending rate in Springfield.", "Bank of Springfield raised its lending rate.")
    unrelated = _pair("Bank", "ORG", "Bank of Springfield", "ORG",
                      "Rugby fans crowded the stadium.", "Bank of Springfield raised its lending rate.")
    out = offline.respond("disambiguate", {"pairs": [related, unrelated]}, Result)
    assert [d["same"] for d in out["decisions"]] == [True, False]
    assert "model" not in out
    assert offline.respond("disambiguate", {"pairs": []}, Result) == {"decisions": []}


# --- triage ----------------------------------------------------------------------------------

def test_triage_relevant_and_not():
    page = {"title": "Sam Bankman-Fried", "summary": "Founder of the FTX crypto exchange, convicted of fraud."}
    near = {"title": "FTX trial", "summary": "Sam Bankman-Fried's fraud trial over the collapse of FTX began."}
    far = {"title": "Rugby World Cup final", "summary": "South Africa beat New Zealand in Paris."}
    yes = offline.respond("triage", {"page": page, "source": near}, offline.TriageResult)
    no = offline.respond("triage", {"page": page, "source": far}, offline.TriageResult)
    assert yes["relevant"] is True and no["relevant"] is False
    assert 0 <= yes["confidence"] <= 1 and yes["reason"] and no["reason"]
    assert offline.respond("triage", {"page": page, "source": far}, offline.TriageResult) == no


# --- registry --------------------------------------------------------------------------------

def test_unknown_purpose_is_a_clear_error(monkeypatch):
    monkeypatch.delitem(offline.HANDLERS, "draft", raising=False)
    with pytest.raises(offline.OfflineModelError, match="cannot answer 'draft'.*planned"):
        offline.respond("draft", {}, offline.TriageResult)
    with pytest.raises(offline.OfflineModelError, match="it knows: .*disambiguate, extract.*triage"):
        offline.respond("poem", {}, offline.TriageResult)
    assert "poem" not in offline.HANDLERS


def test_handlers_can_be_added(monkeypatch):
    class Echo(BaseModel):
        text: str
        by: str = ""

    monkeypatch.setitem(offline.HANDLERS, "echo", lambda variables, schema: {"text": variables["text"]})
    assert offline.respond("echo", {"text": "hi"}, Echo) == {"text": "hi", "by": offline.model_label()}


def test_handler_output_is_validated(monkeypatch):
    monkeypatch.setitem(offline.HANDLERS, "broken", lambda variables, schema: {"nope": 1})
    with pytest.raises(offline.OfflineModelError, match="does not fit TriageResult"):
        offline.respond("broken", {}, offline.TriageResult)
