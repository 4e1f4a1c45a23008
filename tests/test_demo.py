"""The README's first command: `kompl demo` builds the example wiki offline and answers from it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kompl.cli.main import app


def test_demo_runs_the_main_job_offline_and_twice_costs_nothing(tmp_path):
    runner = CliRunner()
    home = tmp_path / "demo"
    first = runner.invoke(app, ["demo", str(home), "--json"], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert len(report["ingest"]["ingested"]) == 7 and report["ingest"]["failed"] == []
    assert report["compile"]["drafted"] > 0 and report["compile"]["failed"] == []
    assert report["pages"].get("entity", 0) >= 4 and report["pages"].get("comparison", 0) >= 1
    assert report["ask"]["citations"], "the demo question should be answered with citations"
    assert "window" in report["ask"]["answer"]
    assert (home / "data" / "pages" / "alexander-fleming.md").exists()

    again = json.loads(runner.invoke(app, ["demo", str(home), "--json"], catch_exceptions=False).stdout)
    assert again["ingest"]["ingested"] == [] and len(again["ingest"]["duplicates"]) == 7
    assert again["compile"]["llm_calls"] == 0 and again["compile"]["plans"] == 0
    assert again["approve"]["approved"] == []
