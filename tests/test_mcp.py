"""The MCP server: tools through the SDK's own clients (in memory and over stdio), read-only,
and never showing drafts or archived-only pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from test_search import ARCHIVED, DRAFT_TOKEN, HIDDEN_TOKEN, build_wiki

from kompl import files
from kompl.ingest import store as sources

pytest.importorskip("mcp")

TOOLS = {"search_wiki", "read_page", "list_pages", "wiki_stats", "get_source", "related_pages"}


@pytest.fixture
def wiki(ws, conn):
    built = build_wiki(ws, conn)
    for sid in ("src-aaaaaaaaaaaa", ARCHIVED):
        files.write_gzip_text(sources.raw_path(ws, sid), f"# Raw text of {sid}\n\nconverted markdown body\n")
    return built


def call(ws, *calls):
    """Run (tool, arguments) calls against the in-memory server; returns [(is_error, data or text)]."""
    from mcp.client import Client

    from kompl.mcp_server import build_server

    async def main():
        out = []
        async with Client(build_server(ws, vector_index=False)) as client:
            for name, args in calls:
                result = await client.call_tool(name, args)
                text = result.content[0].text if result.content else ""
                out.append((result.is_error, text if result.is_error else json.loads(text)))
        return out

    return anyio.run(main)


def test_tools_are_listed_with_descriptions(ws, wiki):
    from mcp.client import Client

    from kompl.mcp_server import build_server

    async def main():
        async with Client(build_server(ws, vector_index=False)) as client:
            return (await client.list_tools()).tools

    listed = anyio.run(main)
    assert {t.name for t in listed} == TOOLS
    assert all(t.description for t in listed)


def test_search_has_scores_and_hides_archived_and_drafts(ws, wiki):
    [(err, found), (err2, hidden), (err3, drafts)] = call(
        ws, ("search_wiki", {"query": "penicillin mould"}), ("search_wiki", {"query": HIDDEN_TOKEN}),
        ("search_wiki", {"query": DRAFT_TOKEN}))
    assert not (err or err2 or err3)
    assert found["results"] and {"rrf", "fts_rank"} <= set(found["results"][0]["scores"])
    assert "Penicillin Rumour" not in [r["title"] for r in found["results"]]
    assert hidden["results"] == [] and drafts["results"] == []


def test_read_page_gives_content_version_provenance_and_sources(ws, wiki):
    [(err, page)] = call(ws, ("read_page", {"page": "Mixed Sources"}))
    assert not err
    assert page["version"] == 1 and "culture dishes" in page["content"]
    assert page["provenance"][0]["author"] == "kompl/offline"
    assert [s["source_id"] for s in page["sources"]] == ["src-aaaaaaaaaaaa"]  # the archived one is not listed


def test_archived_only_page_cannot_be_read_or_related(ws, wiki):
    results = call(ws, ("read_page", {"page": "Penicillin Rumour"}), ("read_page", {"page": str(wiki.hidden["page_id"])}),
                   ("related_pages", {"page": "Penicillin Rumour"}), ("list_pages", {}),
                   ("related_pages", {"page": "Mixed Sources"}))
    (e1, t1), (e2, _), (e3, _), (e4, listed), (e5, related) = results
    assert e1 and e2 and e3 and "No page" in t1
    assert not e4 and "Penicillin Rumour" not in [p["title"] for p in listed["pages"]]
    assert "Draft Page" not in [p["title"] for p in listed["pages"]]
    assert listed["total"] == 4
    assert not e5
    every = [r["page_id"] for group in ("links_out", "links_in", "shared_sources") for r in related[group]]
    assert wiki.hidden["page_id"] not in every and wiki.fleming["page_id"] in every


def test_list_pages_filters_and_pages(ws, wiki):
    [(_, people), (_, first), (_, second)] = call(
        ws, ("list_pages", {"category": "person"}), ("list_pages", {"limit": 3}), ("list_pages", {"limit": 3, "offset": 3}))
    assert {p["title"] for p in people["pages"]} == {"Alexander Fleming", "Howard Florey"}
    assert first["next_offset"] == 3 and second["next_offset"] is None
    assert len(first["pages"]) + len(second["pages"]) == 4


def test_get_source_hides_archived_unless_asked(ws, wiki):
    results = call(ws, ("get_source", {"source_id": "src-aaaaaaaaaaaa", "max_chars": 10}),
                   ("get_source", {"source_id": ARCHIVED}),
                   ("get_source", {"source_id": ARCHIVED, "include_archived": True}))
    (e1, src), (e2, text), (e3, archived) = results
    assert not e1 and src["text"] == "# Raw text" and src["next_offset"] == 10 and src["metadata"]["status"] == "active"
    assert e2 and "No source" in text
    assert not e3 and archived["metadata"]["status"] == "archived"


def test_wiki_stats(ws, wiki):
    [(err, stats)] = call(ws, ("wiki_stats", {}))
    assert not err
    assert stats["sources"] == {"active": 2, "archived": 1}
    assert stats["pages"]["total"] == 4 and stats["drafts_pending"] == 1


def test_stdio_server_with_the_sdk_client(ws, wiki):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(ANONYMIZED_TELEMETRY="False", LITELLM_LOCAL_MODEL_COST_MAP="true", HF_HUB_OFFLINE="1")
    params = StdioServerParameters(command=sys.executable, args=["-m", "kompl", "--home", str(ws.root), "mcp"],
                                   env=env)

    async def main():
        with anyio.fail_after(60):
            async with Client(params) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                found = await client.call_tool("search_wiki", {"query": "Oxford team purified"})
                page = await client.call_tool("read_page", {"page": "Howard Florey"})
                return names, json.loads(found.content[0].text), json.loads(page.content[0].text)

    names, found, page = anyio.run(main)
    assert names == TOOLS
    assert found["results"][0]["title"] == "Howard Florey"
    assert "Oxford team" in page["content"] and page["version"] == 1


def test_help_does_not_import_mcp():
    probe = ("import sys; from typer.testing import CliRunner; from kompl.cli.main import app; "
             "r = CliRunner().invoke(app, sys.argv[1:]); assert r.exit_code == 0, r.output; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'chromadb', 'litellm')))")
    for args in (["--help"], ["mcp", "--help"], ["search", "--help"], ["chat", "--help"]):
        out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60, check=True)
        assert out.stdout.strip().splitlines()[-1] == "[]", args
