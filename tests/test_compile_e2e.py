"""The whole pipeline on the bundled example, offline, as a user runs it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kompl.demo import example_dir


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A workspace with the bundled example ingested and compiled once (shared: compiling costs seconds)."""
    from typer.testing import CliRunner

    from kompl.cli.main import app

    home = tmp_path_factory.mktemp("e2e") / "wiki"
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(app, ["--home", str(home), *map(str, args)], catch_exceptions=False)
        return result

    assert run("init").exit_code == 0
    assert run("ingest", example_dir(), "--json").exit_code == 0
    result = run("compile", "--json")
    assert result.exit_code == 0, result.output
    return home, run, json.loads(result.stdout)


def test_compile_json_contract_and_drafts(compiled):
    _home, run, report = compiled
    assert {"sources", "plans", "drafted", "failed", "llm_calls"} <= set(report)
    assert len(report["sources"]) == 7 and report["failed"] == []
    assert report["llm_calls"] > 0 and report["drafted"] == report["plans"] > 0
    drafts = json.loads(run("drafts", "--json").stdout)
    assert {"plan_id", "title", "page_type", "action"} <= set(drafts[0])
    types = {d["page_type"] for d in drafts}
    assert {"source", "entity"} <= types
    titles = {d["title"] for d in drafts}
    for name in ("Alexander Fleming", "Howard Florey", "Norman Heatley", "Ernst Chain"):
        assert name in titles, f"no entity page planned for {name}"


def test_planted_disagreement_gets_a_comparison_page(compiled):
    _home, run, _report = compiled
    drafts = json.loads(run("drafts", "--json").stdout)
    comparisons = [d for d in drafts if d["page_type"] == "comparison"]
    assert comparisons, "the window/La Touche disagreement produced no comparison page"


def test_recompiling_unchanged_sources_makes_no_calls_and_no_drafts(compiled):
    _home, run, _report = compiled
    before = json.loads(run("drafts", "--json").stdout)
    again = json.loads(run("compile", "--json").stdout)
    assert again["llm_calls"] == 0 and again["plans"] == 0 and again["drafted"] == 0
    assert json.loads(run("drafts", "--json").stdout) == before


def test_approve_builds_an_obsidian_vault_with_working_links(compiled, tmp_path):
    home, run, _report = compiled
    # Work on a copy: the module fixture stays un-approved for the other tests.
    copy = tmp_path / "wiki"
    shutil.copytree(home, copy)
    from typer.testing import CliRunner

    from kompl.cli.main import app

    runner = CliRunner()
    approved = runner.invoke(app, ["--home", str(copy), "approve", "--all", "--json"], catch_exceptions=False)
    assert approved.exit_code == 0, approved.output
    pages = json.loads(runner.invoke(app, ["--home", str(copy), "pages", "--json"]).stdout)
    assert len(pages) >= 12
    titles = {p["title"] for p in pages}
    files = {p["title"]: copy / p["path"] for p in pages}
    linked = 0
    for title, path in files.items():
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\n") and "\npage_type: " in text and "\nsources: " in text
        for target in re.findall(r"\[\[([^\]|#]+)", text):
            linked += 1
            assert target in titles, f"{title} links to a page that does not exist: {target}"
    assert linked >= 10, "pages should be interlinked"
    assert (copy / "data" / "pages").is_dir() and all(Path(p).suffix == ".md" for p in files.values())


def test_rejected_draft_does_not_come_back(compiled, tmp_path):
    home, _run, _report = compiled
    copy = tmp_path / "wiki"
    shutil.copytree(home, copy)
    from typer.testing import CliRunner

    from kompl.cli.main import app

    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["--home", str(copy), *map(str, args)], catch_exceptions=False)

    drafts = json.loads(run("drafts", "--json").stdout)
    victim = next(d for d in drafts if d["page_type"] == "entity")
    rejected = run("reject", victim["plan_id"], "--reason", "not useful", "--json")
    assert rejected.exit_code == 0, rejected.output
    again = json.loads(run("compile", "--json").stdout)
    assert again["plans"] == 0
    assert victim["title"] not in {d["title"] for d in json.loads(run("drafts", "--json").stdout)}
