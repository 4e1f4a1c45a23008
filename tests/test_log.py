"""kompl log: the audit log lists every change (ingest, compile stages, approve, reject, lint) and filters."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from kompl.demo import example_dir


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """The bundled example ingested, compiled, one draft rejected, the rest approved, then linted."""
    from kompl.cli.main import app

    home = tmp_path_factory.mktemp("log") / "wiki"
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["--home", str(home), *map(str, args)], catch_exceptions=False)

    for args in (["init"], ["ingest", example_dir()], ["compile"]):
        assert run(*args).exit_code == 0
    drafts = json.loads(run("drafts", "--json").stdout)
    rejected = next(d for d in drafts if d["page_type"] == "overview")
    assert run("reject", rejected["plan_id"], "--reason", "not needed yet").exit_code == 0
    assert run("approve", "--all").exit_code == 0
    assert run("lint").exit_code in (0, 1)
    return run, rejected


def entries(run, *args) -> list[dict]:
    result = run("log", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_log_lists_every_kind_of_change_with_details(logged):
    run, rejected = logged
    rows = entries(run)
    for row in rows:
        assert {"action", "at", "target", "actor", "details"} <= set(row)
    actions = {r["action"] for r in rows}
    assert {"init", "ingest", "extract", "resolve", "plan", "draft", "approve", "reject", "lint"} <= actions
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)  # oldest first
    ingest = next(r for r in rows if r["action"] == "ingest")
    assert ingest["target"].startswith("src-") and ingest["details"]["title"]
    reject = next(r for r in rows if r["action"] == "reject")
    assert reject["details"] == {"plan_id": rejected["plan_id"], "reason": "not needed yet"}
    lint = next(r for r in rows if r["action"] == "lint")
    assert lint["target"].startswith("lint_run:") and "findings" in lint["details"]


def test_log_filters_by_action_since_and_limit(logged):
    run, _ = logged
    approves = entries(run, "--action", "approve")
    assert approves and {r["action"] for r in approves} == {"approve"}
    both = entries(run, "--action", "approve", "--action", "reject")
    assert {r["action"] for r in both} == {"approve", "reject"} and len(both) == len(approves) + 1
    assert {r["action"] for r in entries(run, "--action", "approve,reject")} == {"approve", "reject"}
    everything = entries(run)
    assert entries(run, "--limit", "3") == everything[-3:]
    future = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%d")
    assert entries(run, "--since", future) == []
    assert entries(run, "--since", "1d") == everything
    middle = everything[len(everything) // 2]["at"]
    assert all(r["at"] >= middle for r in entries(run, "--since", middle)) and entries(run, "--since", middle)


def test_log_text_and_errors(logged):
    run, _ = logged
    text = run("log", "--action", "reject")
    assert text.exit_code == 0 and "reject" in text.stdout and "not needed yet" in text.stdout
    none = run("log", "--action", "no_such_action")
    assert none.exit_code == 0 and "No log entries match" in none.stdout and "approve" in none.stdout
    bad = run("log", "--since", "yesterday-ish")
    assert bad.exit_code == 2


def test_parse_since_ages_and_dates():
    from kompl.cli.log_cmds import parse_since

    now = datetime(2025, 1, 31, 12, 0, tzinfo=timezone.utc)
    assert parse_since("12h", now=now) == "2025-01-31T00:00:00.000000Z"
    assert parse_since("2w", now=now) == "2025-01-17T12:00:00.000000Z"
    assert parse_since("2025-01-02") == "2025-01-02T00:00:00.000000Z"
    assert parse_since("2025-01-02T10:00+02:00") == "2025-01-02T08:00:00.000000Z"
