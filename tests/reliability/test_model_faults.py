"""Model faults through `kompl compile`, with litellm mock responses behind a real-model gateway.

Timeouts, 429 with Retry-After, 5xx, invalid JSON, JSON cut off mid-way (at the
output limit), an empty reply and a reply in the wrong schema. Passing faults
are retried or repaired and every page gets drafted; faults that outlast the
retries leave the plan pending ('failed') with its error in `kompl status
--json`, and `approve --all` commits no page for it. The gateway's own unit
tests are in tests/test_llm.py.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

from reliability import harness
from reliability.invariants import check_invariants, signature
from reliability.mockmodel import LENGTH_CUT, MockModel, error

RETRY_AFTER_S = 7


def _good(task) -> str:
    from kompl import offline

    return json.dumps(offline.respond(task.purpose, task.variables, task.schema))


FAULTS = {
    "timeout": lambda task: error("timeout"),
    "rate_limit": lambda task: error("rate", {"retry-after": str(RETRY_AFTER_S)}),
    "server_error": lambda task: error("server"),
    "invalid_json": lambda task: "Sure! Here is the page: it is about penicillin.",
    "cut_off": lambda task: LENGTH_CUT + _good(task)[: len(_good(task)) // 2],
    "empty": lambda task: "",
    "wrong_schema": lambda task: json.dumps({"page": {"heading": "x"}, "text": 3}),
}


class PerPlan:
    """Gives each drafted page (in the order first seen) its own fault; `times` failing attempts each."""

    def __init__(self, times: int):
        self.times = times
        self.kind_of: dict[str, str] = {}

    def __call__(self, task, attempt, kwargs):
        if task.purpose != "draft":
            return None
        key = task.meta["page_key"]
        if key not in self.kind_of:
            kinds = list(FAULTS)
            if len(self.kind_of) >= len(kinds):
                return None  # the pages beyond one per kind draft normally
            self.kind_of[key] = kinds[len(self.kind_of)]
        if attempt > self.times:
            return None
        return FAULTS[self.kind_of[key]](task)


def _workspace(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["ingested"], home)
    return home


def _plans(home) -> dict[str, dict]:
    conn = sqlite3.connect(home / "data" / "kompl.db")
    conn.row_factory = sqlite3.Row
    rows = {r["page_key"]: dict(r) for r in conn.execute("SELECT page_key, status, error, draft FROM page_plans")}
    conn.close()
    return rows


def _outcomes(home) -> set[str]:
    conn = sqlite3.connect(home / "data" / "kompl.db")
    found = {r[0] for r in conn.execute("SELECT DISTINCT outcome FROM llm_calls WHERE purpose = 'draft'")}
    conn.close()
    return found


def test_passing_faults_are_retried_or_repaired(stages, tmp_path, monkeypatch):
    home = _workspace(stages, tmp_path)
    script = PerPlan(times=1)
    model = MockModel(monkeypatch, script)
    run = harness.kompl_inproc(home, "compile")
    assert run.returncode == 0 and "Traceback" not in run.stderr, (run.stdout, run.stderr)
    assert set(script.kind_of.values()) == set(FAULTS)  # every kind was tried
    plans = _plans(home)
    assert {p["status"] for p in plans.values()} == {"drafted"}, plans
    assert RETRY_AFTER_S in model.sleeps  # the provider's Retry-After was honoured
    assert {"error", "invalid", "ok"} <= _outcomes(home)  # each attempt is on record
    assert harness.kompl_inproc(home, "approve", "--all").returncode == 0
    assert signature(home)["pages"] == stages["refs"]["approve"].signature["pages"]
    assert check_invariants(home, completed=["approve"]) == []


def test_exhausted_retries_leave_the_work_pending_and_commit_nothing(stages, tmp_path, monkeypatch):
    home = _workspace(stages, tmp_path)
    script = PerPlan(times=99)
    MockModel(monkeypatch, script)
    run = harness.kompl_inproc(home, "compile")
    assert "Traceback" not in run.stderr and run.returncode in (0, 1), (run.stdout, run.stderr)
    faulty = script.kind_of
    assert set(faulty.values()) == set(FAULTS)
    plans = _plans(home)
    for key, kind in faulty.items():
        assert plans[key]["status"] == "failed", (kind, plans[key])
        assert plans[key]["error"] and plans[key]["draft"] is None, (kind, plans[key])
    status = json.loads(harness.kompl_inproc(home, "status", "--json").stdout)
    assert status["pending"]["to_draft"] == len(faulty)
    assert len(status["failed_drafts"]) == len(faulty) and all(f["error"] for f in status["failed_drafts"])
    approved = harness.kompl_inproc(home, "approve", "--all")
    assert approved.returncode == 0, approved.stderr
    pages = set(signature(home)["pages"])
    assert not pages & set(faulty), "no page for a plan whose drafting failed"
    assert check_invariants(home, completed=["approve"]) == []
    # the model recovers: the next compile drafts exactly what was left, and nothing is lost
    monkeypatch.undo()
    MockModel(monkeypatch)
    assert harness.kompl_inproc(home, "compile").returncode == 0
    assert harness.kompl_inproc(home, "approve", "--all").returncode == 0
    assert signature(home)["pages"] == stages["refs"]["approve"].signature["pages"]
    assert check_invariants(home) == []
