"""Entity resolution: the cascade, the guards, cross-run merges, review, CLI and the labelled pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kompl import db
from kompl.pipeline import resolve as R
from kompl.text import norm_name

PAIRS = Path(__file__).parent / "data" / "resolution_pairs.jsonl"


# --- helpers -----------------------------------------------------------------------------

def add_source(conn, source_id: str, status: str = "active") -> None:
    conn.execute(
        "INSERT INTO sources (source_id, title, title_from, source_type, input_kind, input, content_hash,"
        " original_sha256, bytes, chars, status, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (source_id, source_id, "given", "text", "file", source_id, "h-" + source_id, "o", 1, 1, status, db.utcnow()),
    )


def mention(conn, source_id: str, name: str, type_: str = "OTHER", count: int = 1, context: str = "",
            kind: str = "entity") -> None:
    if not conn.execute("SELECT 1 FROM sources WHERE source_id=?", (source_id,)).fetchone():
        add_source(conn, source_id)
    conn.execute(
        "INSERT INTO entity_mentions (source_id, name, norm, type, kind, count, context) VALUES (?,?,?,?,?,?,?)",
        (source_id, name, norm_name(name), type_, kind, count, context),
    )


def entity_of(conn, name: str) -> str | None:
    row = R.canonical_for(conn, name)
    return row["entity_id"] if row else None


def same(conn, a: str, b: str) -> bool:
    ea, eb = entity_of(conn, a), entity_of(conn, b)
    assert ea and eb, (a, b)
    return ea == eb


def snapshot(conn) -> tuple:
    return (
        [tuple(r) for r in conn.execute("SELECT * FROM entities ORDER BY entity_id")],
        [tuple(r) for r in conn.execute("SELECT * FROM aliases ORDER BY id")],
    )


class FakeGateway:
    """Answers `disambiguate` tasks from a table of decisions; records what it was asked."""

    def __init__(self, decide=None):
        self.tasks = []
        self.decide = decide or (lambda a, b: (False, 0.9, "fake: different"))

    def run_many(self, tasks):
        self.tasks.extend(tasks)
        out = []
        for task in tasks:
            assert task.purpose == "disambiguate" and task.prompt == "disambiguate"
            assert task.schema is R.DisambiguationResult
            decisions = []
            for pair in task.variables["pairs"]:
                assert set(pair["a"]) == {"name", "type", "context"}
                s, c, why = self.decide(pair["a"]["name"], pair["b"]["name"])
                decisions.append({"same": s, "confidence": c, "reason": why})
            out.append(R.DisambiguationResult.model_validate({"decisions": decisions}))
        return out

    @property
    def pairs(self):
        return [(p["a"]["name"], p["b"]["name"]) for t in self.tasks for p in t.variables["pairs"]]


@pytest.fixture
def gw():
    return FakeGateway()


# --- the cheap layers --------------------------------------------------------------------

def test_exact_and_alias_merges(ws, conn, gw):
    mention(conn, "s1", "The Federal Reserve", "ORG", 3)
    mention(conn, "s2", "Federal Reserve", "ORG", 5)
    mention(conn, "s2", "State of Israel", "GPE")
    mention(conn, "s3", "Israel", "GPE", 9)
    report = R.resolve(ws, conn, gateway=gw)
    assert same(conn, "the federal reserve", "Federal Reserve")
    assert same(conn, "Israel", "State of Israel")
    assert R.canonical_for(conn, "State of Israel")["canonical_name"] == "Israel"  # most frequent full form
    assert report.entities_created == 2 and gw.tasks == []
    # A later run: a known alias spelled differently joins through the alias layer.
    mention(conn, "s4", "FEDERAL RESERVE", "ORG")
    mention(conn, "s4", "the  Federal-Reserve", "ORG")
    report = R.resolve(ws, conn, gateway=gw)
    assert report.entities_created == 0
    assert same(conn, "the  Federal-Reserve", "Federal Reserve")
    row = conn.execute("SELECT layer FROM aliases WHERE norm=?", (norm_name("the  Federal-Reserve"),)).fetchone()
    assert row["layer"] == "alias"


def test_fuzzy_merges_spelling_variants(ws, conn, gw):
    mention(conn, "s1", "Sam Bankman-Fried", "PERSON", 10)
    mention(conn, "s2", "Sam Bankman Fried", "PERSON")
    mention(conn, "s3", "Sam Bankman-Freid", "PERSON")
    mention(conn, "s3", "DraftKings", "ORG", 2)
    mention(conn, "s4", "Draft Kings", "ORG")
    R.resolve(ws, conn, gateway=gw)
    assert same(conn, "Sam Bankman Fried", "Sam Bankman-Fried")
    assert same(conn, "Sam Bankman-Freid", "Sam Bankman-Fried")
    assert same(conn, "Draft Kings", "DraftKings")
    typo = conn.execute("SELECT layer, reason, confidence FROM aliases WHERE norm=?",
                        (norm_name("Sam Bankman-Freid"),)).fetchone()
    assert typo["layer"] == "fuzzy" and "fuzzy score" in typo["reason"] and typo["confidence"] >= R.PENDING_BELOW
    assert R.canonical_for(conn, "sam bankman fried")["canonical_name"] == "Sam Bankman-Fried"


@pytest.mark.parametrize("a,b,type_", [
    ("GPT-3", "GPT-4", "PRODUCT"), ("iPhone 14", "iPhone 15", "PRODUCT"), ("Python 2", "Python 3", "PRODUCT"),
    ("Windows 10", "Windows 11", "PRODUCT"), ("Apollo 11", "Apollo 13", "EVENT"), ("GPT-4", "GPT-4o", "PRODUCT"),
    ("Diablo 3", "Diablo IV", "WORK"), ("iPhone", "iPhone 15", "PRODUCT"), ("Model S", "Model X", "PRODUCT"),
])
def test_version_siblings_never_merge(ws, conn, a, b, type_):
    # Even a model that says "same" to everything must not be asked about them.
    gw = FakeGateway(lambda x, y: (True, 1.0, "fake: same"))
    mention(conn, "s1", a, type_, 5, context=f"{a} was released and reviewed widely.")
    mention(conn, "s2", b, type_, 5, context=f"{b} was released and reviewed widely.")
    R.resolve(ws, conn, gateway=gw)
    assert not same(conn, a, b)
    assert gw.pairs == []
    assert R.version_siblings(R.Name(norm_name(a), type=type_), R.Name(norm_name(b), type=type_))


def test_incompatible_types_never_merge(ws, conn):
    gw = FakeGateway(lambda x, y: (True, 1.0, "fake: same"))
    mention(conn, "s1", "Jordan", "GPE", 3)
    mention(conn, "s2", "Jordan", "PERSON", 1)  # same norm, majority type wins: one name
    mention(conn, "s3", "Washington", "GPE")
    mention(conn, "s3", "George Washington", "PERSON")
    mention(conn, "s4", "Trump", "PERSON")
    mention(conn, "s4", "Trump Tower", "FAC")
    mention(conn, "s5", "Apple", "ORG")
    mention(conn, "s5", "Apple", "PERSON", kind="concept")
    R.resolve(ws, conn, gateway=gw)
    assert not same(conn, "Washington", "George Washington")
    assert not same(conn, "Trump", "Trump Tower")
    assert all("Tower" not in a + b for a, b in gw.pairs)
    assert not R.types_compatible("PERSON", "ORG")
    assert R.types_compatible("GPE", "LOC") and R.types_compatible("OTHER", "PERSON")
    assert conn.execute("SELECT COUNT(*) FROM entities WHERE norm='apple'").fetchone()[0] == 2  # entity vs concept


def test_acronym_and_surname_merges(ws, conn, gw):
    mention(conn, "s1", "Federal Bureau of Investigation", "ORG", 2)
    mention(conn, "s2", "FBI", "ORG", 7)
    mention(conn, "s1", "Sam Bankman-Fried", "PERSON", 4)
    mention(conn, "s2", "SBF", "PERSON", 6)
    mention(conn, "s3", "Bankman-Fried", "PERSON", 20)
    mention(conn, "s3", "Mr. Bankman-Fried", "PERSON")
    R.resolve(ws, conn, gateway=gw)
    assert same(conn, "FBI", "Federal Bureau of Investigation")
    assert same(conn, "SBF", "Sam Bankman-Fried")
    assert same(conn, "Bankman-Fried", "Sam Bankman-Fried")
    assert same(conn, "Mr. Bankman-Fried", "Sam Bankman-Fried")
    # The canonical name is the full form, not the more frequent acronym or surname.
    assert R.canonical_for(conn, "FBI")["canonical_name"] == "Federal Bureau of Investigation"
    assert R.canonical_for(conn, "SBF")["canonical_name"] == "Sam Bankman-Fried"
    layers = {r["alias"]: r["layer"] for r in R.list_aliases(conn, "merged")}
    assert layers["FBI"] == "acronym" and layers["Bankman-Fried"] == "surname"


def test_ambiguous_surname_goes_to_review(ws, conn, gw):
    mention(conn, "s1", "Jim Jordan", "PERSON")
    mention(conn, "s2", "Michael Jordan", "PERSON")
    mention(conn, "s3", "Jordan", "PERSON")
    R.resolve(ws, conn, gateway=gw)
    assert not same(conn, "Jordan", "Jim Jordan") and not same(conn, "Jordan", "Michael Jordan")
    pending = R.list_aliases(conn, "pending")
    assert {(p["alias"], p["canonical_name"]) for p in pending} == {("Jordan", "Jim Jordan"), ("Jordan", "Michael Jordan")}
    assert all("2 entities fit" in p["reason"] for p in pending)


def test_cross_run_merge(ws, conn, gw):
    mention(conn, "s1", "Caroline Ellison", "PERSON", 3)
    mention(conn, "s1", "Major League Baseball", "ORG")
    R.resolve(ws, conn, gateway=gw)
    first = {n: entity_of(conn, n) for n in ("Caroline Ellison", "Major League Baseball")}
    # A week later, variants arrive in new sources; neither side has a page.
    mention(conn, "s2", "Ellison", "PERSON", 5)
    mention(conn, "s2", "MLB", "ORG", 4)
    mention(conn, "s2", "Ms. Ellison", "PERSON")
    report = R.resolve(ws, conn, gateway=gw)
    assert report.new_names == 3 and report.entities_created <= 1
    assert entity_of(conn, "Ellison") == first["Caroline Ellison"]
    assert entity_of(conn, "MLB") == first["Major League Baseball"]
    assert R.entity_sources(conn, first["Caroline Ellison"]) == ["s1", "s2"]


def test_union_find_transitivity():
    uf = R.UnionFind()
    for x in "abcde":
        uf.add(x)
    uf.union("a", "b")
    uf.union("c", "d")
    uf.union("b", "d")
    assert len({uf.find(x) for x in "abcd"}) == 1 and uf.find("e") != uf.find("a")
    assert sorted(uf.members[uf.find("a")]) == ["a", "b", "c", "d"]


def test_transitive_merge_across_layers(ws, conn, gw):
    # "U.S." = "US" (exact), "US" = "United States" (acronym), "United States" = "United-States" (exact):
    # all one entity although no single rule links "U.S." and "United-States".
    mention(conn, "s1", "U.S.", "GPE", 8)
    mention(conn, "s2", "US", "GPE", 2)
    mention(conn, "s3", "United States", "GPE", 4)
    mention(conn, "s4", "United-States", "GPE")
    R.resolve(ws, conn, gateway=gw)
    assert same(conn, "U.S.", "United-States")
    assert R.canonical_for(conn, "US")["canonical_name"] == "United States"


def test_model_layer_batches_and_closes_transitively(ws, conn):
    # Names in the ambiguous band; the model says which are the same.
    gw = FakeGateway(lambda a, b: ("LCD" not in a + b, 0.9, "fake: LCD is another model"))
    ctx = "Valve's handheld gaming PC plays the Steam library."
    mention(conn, "s1", "Steam Deck", "PRODUCT", 5, ctx)
    mention(conn, "s2", "Steam Deck handheld", "PRODUCT", 1, ctx)
    mention(conn, "s3", "Valve Steam Deck", "PRODUCT", 1, ctx)
    mention(conn, "s3", "Steam Deck LCD", "PRODUCT", 1, "The older LCD model has a smaller battery.")
    report = R.resolve(ws, conn, gateway=gw)
    assert gw.tasks and all(len(t.variables["pairs"]) <= R.MODEL_BATCH for t in gw.tasks)
    assert report.model_calls == len(gw.tasks)
    assert same(conn, "Steam Deck", "Steam Deck handheld") and same(conn, "Valve Steam Deck", "Steam Deck")
    assert not same(conn, "Steam Deck LCD", "Steam Deck")
    rows = {r["alias"]: r for r in R.list_aliases(conn)}
    assert rows["Steam Deck handheld"]["layer"] in ("model", "embedding")
    assert ("Steam Deck", "Steam Deck handheld") in gw.pairs


def test_model_says_different_is_recorded_as_rejected(ws, conn, gw):
    ctx = "The Springboks won the Rugby World Cup final in Paris."
    mention(conn, "s1", "Rugby World Cup", "EVENT", 4, ctx)
    mention(conn, "s2", "World Cup", "EVENT", 2, ctx)
    report = R.resolve(ws, conn, gateway=gw)
    assert gw.pairs and report.rejected == 1 and report.pending == 0
    (row,) = R.list_aliases(conn, "rejected")
    assert row["layer"] == "model" and "different" in row["reason"]
    assert not same(conn, "World Cup", "Rugby World Cup")


def test_low_confidence_goes_to_pending(ws, conn):
    gw = FakeGateway(lambda a, b: (True, 0.55, "fake: probably"))
    mention(conn, "s1", "Rugby World Cup", "EVENT", 4, "The Springboks won the Rugby World Cup final in Paris.")
    mention(conn, "s2", "World Cup", "EVENT", 2, "South Africa won the World Cup final in Paris.")
    report = R.resolve(ws, conn, gateway=gw)
    assert not same(conn, "World Cup", "Rugby World Cup")
    assert report.pending == 1
    (row,) = R.list_aliases(conn, "pending")
    assert row["layer"] == "model" and row["confidence"] == pytest.approx(0.55) and "probably" in row["reason"]


def test_model_unavailable_defers_then_retries(ws, conn):
    class Failing:
        def run_many(self, tasks):
            from kompl.llm import LLMError
            return [LLMError("no key: set OPENAI_API_KEY") for _ in tasks]

    ctx = "The Springboks won the Rugby World Cup final in Paris."
    mention(conn, "s1", "Rugby World Cup", "EVENT", 4, ctx)
    mention(conn, "s2", "World Cup", "EVENT", 2, ctx)
    report = R.resolve(ws, conn, gateway=Failing())
    assert report.model_errors and report.pending == 1
    assert R.list_aliases(conn, "pending")[0]["needs_model"] == 1
    gw = FakeGateway(lambda a, b: (True, 0.95, "fake: same tournament"))
    R.resolve(ws, conn, gateway=gw)
    assert len(gw.pairs) == 1 and same(conn, "World Cup", "Rugby World Cup")
    assert R.list_aliases(conn, "pending") == []
    calls = len(gw.tasks)
    R.resolve(ws, conn, gateway=gw)
    assert len(gw.tasks) == calls


def test_rerun_is_idempotent(ws, conn):
    gw = FakeGateway(lambda a, b: (False, 0.9, "fake"))
    ctx = "Valve's handheld gaming PC plays the Steam library."
    for sid, name, t in [("s1", "Steam Deck", "PRODUCT"), ("s2", "Steam Deck handheld", "PRODUCT"),
                         ("s1", "Sam Bankman-Fried", "PERSON"), ("s2", "SBF", "PERSON"), ("s3", "Jordan", "PERSON"),
                         ("s3", "Jim Jordan", "PERSON"), ("s4", "Michael Jordan", "PERSON")]:
        mention(conn, sid, name, t, 1, ctx)
    R.resolve(ws, conn, gateway=gw)
    calls, before = len(gw.tasks), snapshot(conn)
    audit = len(db.activity(conn, action="resolve"))
    report = R.resolve(ws, conn, gateway=gw)
    assert len(gw.tasks) == calls and snapshot(conn) == before
    assert report.changed is False and len(db.activity(conn, action="resolve")) == audit


def test_every_run_with_changes_is_audited(ws, conn, gw):
    mention(conn, "s1", "FBI", "ORG")
    mention(conn, "s1", "Federal Bureau of Investigation", "ORG")
    R.resolve(ws, conn, gateway=gw)
    (row,) = db.activity(conn, action="resolve")
    assert row["details"]["new_names"] == 2 and row["details"]["merged"] == {"acronym": 1}


def test_entity_sources_excludes_archived(ws, conn, gw):
    add_source(conn, "s-old", status="archived")
    mention(conn, "s1", "Gary Wang", "PERSON")
    mention(conn, "s-old", "Gary Wang", "PERSON")
    mention(conn, "s2", "Wang", "PERSON")
    R.resolve(ws, conn, gateway=gw)
    eid = entity_of(conn, "Gary Wang")
    assert R.entity_sources(conn, eid) == ["s1", "s2"]
    assert R.entity_sources(conn, eid, active_only=False) == ["s-old", "s1", "s2"]
    listed = {e["canonical_name"]: e["sources"] for e in R.list_entities(conn)}
    assert listed["Gary Wang"] == ["s1", "s2"]


def test_canonical_for_accepts_names_norms_and_ids(ws, conn, gw):
    mention(conn, "s1", "New York City", "GPE")
    mention(conn, "s2", "NYC", "GPE")
    R.resolve(ws, conn, gateway=gw)
    row = R.canonical_for(conn, "nyc")
    assert row["canonical_name"] == "New York City" and row["type"] == "GPE"
    assert R.canonical_for(conn, row["entity_id"])["entity_id"] == row["entity_id"]
    assert R.canonical_for(conn, "Nowhere") is None


# --- manual review through the CLI ---------------------------------------------------------

def test_cli_resolve_aliases_merge_and_split(ws, conn, kompl):
    mention(conn, "s1", "Jim Jordan", "PERSON", 3)
    mention(conn, "s2", "Michael Jordan", "PERSON")
    mention(conn, "s3", "Jordan", "PERSON", 2)
    mention(conn, "s4", "Kelce", "PERSON", 4)
    mention(conn, "s4", "Travis Kelce", "PERSON", 2)
    result = kompl("resolve", "--no-model", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new_names"] == 5

    result = kompl("aliases", "--pending", "--json")
    pending = json.loads(result.stdout)
    assert {p["canonical_name"] for p in pending} == {"Jim Jordan", "Michael Jordan"}
    assert "Jordan" in kompl("aliases", "--pending").stdout

    result = kompl("aliases", "merge", "Jordan", "Jim Jordan")
    assert result.exit_code == 0, result.output
    assert same(conn, "Jordan", "Jim Jordan")
    assert R.list_aliases(conn, "pending") == [] or all(
        p["canonical_name"] == "Michael Jordan" for p in R.list_aliases(conn, "pending"))
    (merge_row,) = db.activity(conn, action="alias_merge")
    assert merge_row["target"] == entity_of(conn, "Jim Jordan")

    result = kompl("aliases", "split", "Kelce")
    assert result.exit_code == 0, result.output
    assert not same(conn, "Kelce", "Travis Kelce")
    assert len(db.activity(conn, action="alias_split")) == 1
    rejected = [r for r in R.list_aliases(conn, "rejected") if r["alias"] == "Kelce"]
    assert rejected and rejected[0]["canonical_name"] == "Travis Kelce"

    # A split name stays split: a new variant cannot pull it back in through union-find.
    mention(conn, "s5", "Travis Kelce's", "PERSON")
    assert kompl("resolve", "--no-model").exit_code == 0
    assert same(conn, "Travis Kelce's", "Travis Kelce") and not same(conn, "Kelce", "Travis Kelce")

    listed = json.loads(kompl("aliases", "--json").stdout)
    assert {r["status"] for r in listed} >= {"merged", "rejected"}


def test_cli_errors_are_clear(ws, kompl):
    result = kompl("aliases", "merge", "Nobody", "Somebody")
    assert result.exit_code != 0
    assert "No entity or alias named 'Nobody'" in result.stderr and "Traceback" not in result.output
    result = kompl("aliases", "split", "Nobody")
    assert result.exit_code != 0 and "No alias named" in result.stderr
    assert "Nothing new to resolve" in kompl("resolve").stdout
    assert "Example" in kompl("resolve", "--help").stdout
    assert "merge" in kompl("aliases", "--help").stdout


def test_split_of_unmerged_name_is_an_error(ws, conn, kompl):
    mention(conn, "s1", "Valve", "ORG")
    kompl("resolve", "--no-model")
    result = kompl("aliases", "split", "Valve")
    assert result.exit_code != 0 and "not merged with anything" in result.stderr


def test_manual_merge_survives_rerun(ws, conn, gw):
    mention(conn, "s1", "Federal Reserve", "ORG", 4)
    mention(conn, "s2", "Fed", "ORG", 9)
    R.resolve(ws, conn, gateway=gw)
    assert not same(conn, "Fed", "Federal Reserve")
    R.merge(conn, "Fed", "Federal Reserve")
    assert same(conn, "Fed", "Federal Reserve")
    mention(conn, "s3", "The Fed", "ORG")
    R.resolve(ws, conn, gateway=gw)
    assert same(conn, "The Fed", "Federal Reserve")
    assert R.canonical_for(conn, "fed")["canonical_name"] == "Federal Reserve"


# --- the labelled pairs ----------------------------------------------------------------------

def _cheap_same(a: dict, b: dict) -> bool:
    na = R.Name(norm=norm_name(a["name"]), surface=a["name"], type=a["type"])
    nb = R.Name(norm=norm_name(b["name"]), surface=b["name"], type=b["type"])
    match = R.match_pair(na, nb)
    return match is not None and not match.band and match.confidence >= R.PENDING_BELOW


def test_labelled_pairs_precision_and_recall(capsys):
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(pairs) >= 60 and {p["same"] for p in pairs} == {True, False}
    tp = fp = fn = 0
    misses = []
    for p in pairs:
        predicted = _cheap_same({"name": p["a"], "type": p["type_a"]}, {"name": p["b"], "type": p["type_b"]})
        tp += predicted and p["same"]
        fp += predicted and not p["same"]
        fn += (not predicted) and p["same"]
        if predicted != p["same"]:
            misses.append(f"{p['a']} / {p['b']}")
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    with capsys.disabled():
        print(f"\nresolution pairs: {len(pairs)}, cheap layers precision {precision:.3f} recall {recall:.3f}")
    assert precision >= 0.95, misses
    assert recall >= 0.75, misses


def test_labelled_pairs_through_the_pipeline(ws, conn, gw):
    """The same pairs, resolved as a corpus (one source per pair): no false merges."""
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    checked = 0
    for i, p in enumerate(pairs):
        if p["same"]:
            continue
        ws_conn = conn
        ws_conn.execute("DELETE FROM aliases")
        ws_conn.execute("DELETE FROM entities")
        ws_conn.execute("DELETE FROM entity_mentions")
        mention(ws_conn, f"a{i}", p["a"], p["type_a"])
        mention(ws_conn, f"b{i}", p["b"], p["type_b"])
        R.resolve(ws, ws_conn, gateway=gw)  # the fake model says "different" to everything it is asked
        assert not same(ws_conn, p["a"], p["b"]), p
        checked += 1
    assert checked >= 30


def test_real_offline_model_path(ws, conn):
    """Once the gateway and the offline model exist, the model layer runs through them."""
    llm = pytest.importorskip("kompl.llm")
    if not hasattr(llm, "Gateway"):
        pytest.skip("the model gateway is not built yet")
    ctx = "The Springboks beat the All Blacks in the Rugby World Cup final."
    mention(conn, "s1", "Rugby World Cup", "EVENT", 3, ctx)
    mention(conn, "s2", "World Cup", "EVENT", 2, ctx)
    mention(conn, "s3", "GPT-3", "PRODUCT", 1, "GPT-3 came out in 2020.")
    mention(conn, "s3", "GPT-4", "PRODUCT", 1, "GPT-4 came out in 2023.")
    report = R.resolve(ws, conn)
    assert not report.model_errors, report.model_errors
    assert report.model_calls >= 1
    assert not same(conn, "GPT-3", "GPT-4")
    recorded = conn.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose='disambiguate'").fetchone()[0]
    assert recorded == report.model_calls
    again = R.resolve(ws, conn)
    assert again.model_calls == 0
