"""Contradictions across sources: the planted disagreement in the example, precision, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kompl.offline import judge as J
from kompl.pipeline import conflicts as C

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "example"


class CountingGateway:
    """The offline gateway, counting the tasks it runs."""

    def __init__(self, ws, conn):
        from kompl.llm import Gateway

        self.inner = Gateway(ws, conn)
        self.model = self.inner.model
        self.tasks = []

    def run_many(self, tasks):
        self.tasks.extend(tasks)
        return self.inner.run_many(tasks)


@pytest.fixture(scope="module")
def example_db(tmp_path_factory):
    """The bundled example, ingested, extracted and resolved once (offline), as a template database."""
    from kompl import db
    from kompl.ingest.service import expand, ingest
    from kompl.pipeline.extract import extract_pending
    from kompl.pipeline.resolve import resolve
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(tmp_path_factory.mktemp("example") / "wiki")
    conn = db.connect(ws.db_path)
    inputs, report = expand([str(EXAMPLE)])
    ingest(ws, conn, inputs, report=report)
    extract_pending(ws, conn)
    resolve(ws, conn)
    conn.close()
    return ws


@pytest.fixture
def example(example_db, tmp_path):
    """A private copy of the example workspace's database."""
    import shutil
    import sqlite3

    from kompl import db
    from kompl.workspace import init_workspace

    ws, _ = init_workspace(tmp_path / "copy")
    src = sqlite3.connect(example_db.db_path)
    dst = sqlite3.connect(ws.db_path)
    src.backup(dst)
    src.close()
    dst.close()
    shutil.copytree(example_db.raw_dir, ws.raw_dir, dirs_exist_ok=True)
    conn = db.connect(ws.db_path)
    yield ws, conn
    conn.close()


def source_of(conn, filename: str) -> str:
    return conn.execute("SELECT source_id FROM sources WHERE input LIKE ?", (f"%{filename}",)).fetchone()[0]


def test_planted_disagreement_is_found_and_unrelated_claims_are_not(example):
    ws, conn = example
    gw = CountingGateway(ws, conn)
    report = C.find_conflicts(ws, conn, gateway=gw)
    assert not report.errors and report.model_calls == len(gw.tasks) > 0
    fleming, myth = source_of(conn, "01-fleming-discovery.md"), source_of(conn, "06-window-myth.md")
    found = C.list_conflicts(conn)
    pairs = [{row["a"]["source_id"], row["b"]["source_id"]} for row in found]
    assert {fleming, myth} in pairs
    planted = next(r for r in found if {r["a"]["source_id"], r["b"]["source_id"]} == {fleming, myth})
    texts = planted["a"]["claim"] + " " + planted["b"]["claim"]
    assert "window" in texts and planted["topic"] and planted["model"].startswith("kompl/offline")
    assert planted["a"]["quote"] and planted["b"]["quote"]
    # precision: every contradiction on the example is between the window story (01) and its refutation (06)
    assert report.contradicts == len(found) >= 1
    assert all(p == {fleming, myth} for p in pairs), found
    # most judged pairs are compatible: the filter and the rules do not flag everything
    judged = C.list_conflicts(conn, verdict=None)
    assert len(judged) == report.judged and sum(r["verdict"] == "compatible" for r in judged) >= len(judged) - 4
    audit = conn.execute("SELECT details FROM activity WHERE action='conflicts'").fetchall()
    assert len(audit) == 1 and json.loads(audit[0][0])["contradicts"] == report.contradicts


def test_rerun_makes_zero_model_calls(example):
    ws, conn = example
    first = C.find_conflicts(ws, conn, gateway=CountingGateway(ws, conn))
    assert first.judged > 0
    gw = CountingGateway(ws, conn)
    again = C.find_conflicts(ws, conn, gateway=gw)
    assert gw.tasks == [] and again.model_calls == 0 and again.judged == 0
    assert again.survivors == 0  # every claim was scanned: nothing is even compared again
    full = C.find_conflicts(ws, conn, gateway=gw, full=True)
    assert gw.tasks == [] and full.already_judged == first.survivors  # a full rescan finds only judged pairs
    assert conn.execute("SELECT COUNT(*) FROM activity WHERE action='conflicts'").fetchone()[0] == 1


def test_only_new_claims_look_for_partners(example):
    ws, conn = example
    C.find_conflicts(ws, conn, gateway=CountingGateway(ws, conn))
    claims = C._load_claims(conn)
    newest = max(c.id for c in claims)
    pairs, _ = C.candidate_pairs(conn, claims, new_ids={newest})
    assert pairs and all(newest in (p.a.id, p.b.id) for p in pairs)
    assert len(pairs) <= C.MAX_PARTNERS


def test_failed_batches_are_retried_next_time(example):
    from kompl.llm import ModelCallError

    ws, conn = example

    class Failing:
        model = "test/failing"

        def run_many(self, tasks):
            return [ModelCallError("provider down") for _ in tasks]

    report = C.find_conflicts(ws, conn, gateway=Failing())
    assert report.errors and report.judged == 0
    assert conn.execute("SELECT COUNT(*) FROM conflicts").fetchone()[0] == 0
    assert C.find_conflicts(ws, conn).judged == report.survivors


def test_archived_source_leaves_candidates_and_listing(example):
    ws, conn = example
    C.find_conflicts(ws, conn)
    myth = source_of(conn, "06-window-myth.md")
    conn.execute("UPDATE sources SET status='archived' WHERE source_id=?", (myth,))
    assert all(myth not in (r["a"]["source_id"], r["b"]["source_id"]) for r in C.list_conflicts(conn, verdict=None))
    pairs, _ = C.candidate_pairs(conn)
    assert all(myth not in (p.a.source_id, p.b.source_id) for p in pairs)


def test_pairs_come_only_from_different_sources(example):
    _ws, conn = example
    pairs, candidates = C.candidate_pairs(conn)
    assert candidates >= len(pairs) > 0
    assert all(p.a.source_id != p.b.source_id for p in pairs)
    assert len({p.hash for p in pairs}) == len(pairs)


def test_conflicts_command(example, monkeypatch):
    from typer.testing import CliRunner

    from kompl.cli.main import app

    ws, conn = example
    C.find_conflicts(ws, conn)
    result = CliRunner().invoke(app, ["--home", str(ws.root), "conflicts", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert rows and all(r["verdict"] == "contradicts" for r in rows)
    assert {"claim", "quote", "source_id", "source_title"} <= set(rows[0]["a"])
    text = CliRunner().invoke(app, ["--home", str(ws.root), "conflicts"], catch_exceptions=False)
    assert text.exit_code == 0 and "window" in text.stdout


# --- the offline judge's rules ------------------------------------------------------------------

@pytest.mark.parametrize("a, b, topic, verdict", [
    ("Fleming said a spore drifted in through the open window of his laboratory.",
     "The story that the spore drifted through Fleming's open window is a myth.", "Alexander Fleming", "contradicts"),
    ("Pfizer opened its first deep-tank plant in 1944.", "Pfizer opened its first deep-tank plant in 1943.",
     "Pfizer", "contradicts"),
    ("Fleming showed that penicillin killed bacteria and was not toxic to white blood cells.",
     "Chain found Fleming's 1929 paper on penicillin and chose it for closer work.", "Alexander Fleming", "compatible"),
    ("Hare argued instead that the spore came from La Touche's laboratory on the floor below.",
     "Ronald Hare later argued it came from Charles La Touche's mycology laboratory on the floor below.",
     "Ronald Hare", "compatible"),
    ("The laboratory window was never opened, so no spore drifted in through it.",
     "The story of a spore drifting in through the window is wrong: the window was never opened.", "", "compatible"),
    ("Fleming's disputed account says the spore drifted in through an open window.",
     "Fleming's account is that a spore drifted in through the open window of his laboratory.", "Fleming", "unsure"),
    ("Penicillin was mass-produced in deep tanks by 1944.", "Albert Alexander died in March 1941.", "", "compatible"),
])
def test_offline_judge_rules(a, b, topic, verdict):
    assert J.judge(a, b, topic)["verdict"] == verdict
    assert J.judge(b, a, topic)["verdict"] == verdict  # symmetric


def test_offline_judge_through_the_gateway(ws, conn):
    from kompl.llm import Gateway, Task

    task = Task(purpose="judge_contradiction", prompt="judge_contradiction", schema=C.JudgeResult, variables={
        "pairs": [{"a": {"claim": "The spore came in through the open window.", "quote": "q", "source": "src-a"},
                   "b": {"claim": "The open window story is false: the spore never came in through it.",
                         "quote": "q", "source": "src-b"}, "topic": "spore"}]})
    result = Gateway(ws, conn).run(task)
    assert [v.verdict for v in result.verdicts] == ["contradicts"]
    assert result.model.startswith("kompl/offline")
