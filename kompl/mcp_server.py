"""`kompl mcp`: the wiki served read-only to agents over the Model Context Protocol (stdio).

Built on the official SDK (`mcp` 2.x, `MCPServer`). Tools:

    search_wiki     hybrid search (full text + vectors), with each result's score components
    read_page       a page's current text, version, history (provenance) and its active sources
    list_pages      pages, filtered by type and category, paged
    wiki_stats      counts of sources, pages, drafts; the latest sources and pages
    get_source      a source's converted markdown and metadata (archived ones only when asked)
    related_pages   links out, links in, and pages that share sources

Every tool sees what every reader sees: committed pages with at least one
active source. Drafts and archived-only pages never appear; a page or link
to one is treated as absent. Nothing here writes to the wiki.

The tool functions take the workspace and are plain Python (`tools(ws)` returns
them), so they are usable without the SDK; `build_server(ws)` registers them.
Each call opens its own database connection: the SDK runs synchronous tools in
worker threads, and SQLite connections belong to one thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from kompl import db
from kompl.errors import KomplError, NotFoundError
from kompl.workspace import Workspace

SERVER_NAME = "kompl"
MAX_SOURCE_CHARS = 50_000  # per get_source call; longer texts are paged with `offset`
INSTRUCTIONS = (
    "Read-only access to a kompl wiki: pages compiled from the user's documents, with provenance. "
    "Use search_wiki to find pages, read_page to read one (cite pages by title and sources by id), "
    "related_pages to explore, get_source for the converted source text, wiki_stats for an overview."
)


@contextlib.contextmanager
def _connect(ws: Workspace) -> Iterator[sqlite3.Connection]:
    conn = db.connect(ws.db_path)
    try:
        yield conn
    finally:
        conn.close()


def _visible_page(conn: sqlite3.Connection, ref: str | int) -> dict:
    from kompl.wiki import store

    page = store.get(conn, ref)
    row = conn.execute(f"SELECT 1 FROM pages WHERE page_id = ? AND page_id IN ({store.visible_page_ids_sql()})",
                       (page["page_id"],)).fetchone()
    if row is None:  # deleted, or every source archived: absent for readers
        raise NotFoundError(f"No page {ref!r}", hint="search_wiki or list_pages shows the pages there are")
    return page


def tools(ws: Workspace, *, vector_index: Any = None) -> dict[str, Callable[..., dict]]:
    """The tool functions bound to `ws` (name -> function returning a JSON-able dict)."""

    def search_wiki(query: str, limit: int = 10, page_type: str | None = None, category: str | None = None) -> dict:
        """Search the wiki (full text and vectors, fused by reciprocal rank). Returns pages best first,
        each with its score and score components (fts_rank, bm25, vector_rank, vector, rrf, sources, recency)."""
        from kompl.read.search import search

        with _connect(ws) as conn:
            found = search(ws, conn, query, limit=max(1, min(int(limit), 50)), page_type=page_type,
                           category=category, vector_index=vector_index)
        results = [{"page_id": h.page_id, "title": h.title, "page_type": h.page_type, "category": h.category,
                    "slug": h.slug, "score": h.score, "scores": h.scores, "snippet": h.snippet} for h in found.hits]
        return {"query": query, "results": results, "notes": found.notes}

    def read_page(page: str) -> dict:
        """Read one page by id, slug, page key or title: its current markdown, version, the versions
        before it (who wrote each and why) and the active sources it is built from."""
        from kompl.wiki import store

        with _connect(ws) as conn:
            row = _visible_page(conn, page)
            sources = conn.execute(
                "SELECT s.source_id, s.title, s.source_type, s.url, s.ingested_at, ps.contribution"
                " FROM page_sources ps JOIN sources s ON s.source_id = ps.source_id"
                " WHERE ps.page_id = ? AND s.status = 'active' ORDER BY s.source_id", (row["page_id"],)).fetchall()
            return {
                "page_id": row["page_id"], "title": row["title"], "page_type": row["page_type"],
                "category": row["category"], "slug": row["slug"], "summary": row["summary"],
                "aliases": row["aliases"], "version": row["version"], "updated_at": row["updated_at"],
                "content": store.content(conn, row["page_id"]),
                "provenance": store.history(conn, row["page_id"]),
                "sources": [dict(s) for s in sources],
            }

    def list_pages(page_type: str | None = None, category: str | None = None, limit: int = 100,
                   offset: int = 0) -> dict:
        """List pages (title, type, category, summary, version), filtered by page_type
        (source, original-source, entity, concept, comparison, overview, answer) and category; paged."""
        from kompl.wiki import store

        with _connect(ws) as conn:
            pages = [p for p in store.list_pages(conn, page_type=page_type)
                     if not category or p["category"] == category]
        limit, offset = max(1, min(int(limit), 500)), max(0, int(offset))
        part = pages[offset : offset + limit]
        return {
            "total": len(pages), "offset": offset,
            "next_offset": offset + len(part) if offset + len(part) < len(pages) else None,
            "pages": [{"page_id": p["page_id"], "title": p["title"], "page_type": p["page_type"],
                       "category": p["category"], "summary": p["summary"], "version": p["version"],
                       "updated_at": p["updated_at"]} for p in part],
        }

    def wiki_stats() -> dict:
        """Counts of sources (active, archived), visible pages by type, drafts waiting for review,
        and the five latest sources and pages."""
        from kompl.wiki import store

        visible = store.visible_page_ids_sql()
        with _connect(ws) as conn:
            sources = {r[0]: r[1] for r in conn.execute("SELECT status, COUNT(*) FROM sources GROUP BY status")}
            by_type = {r[0]: r[1] for r in conn.execute(
                f"SELECT page_type, COUNT(*) FROM pages WHERE page_id IN ({visible}) GROUP BY page_type")}
            drafts = conn.execute("SELECT COUNT(*) FROM page_plans WHERE status = 'drafted'").fetchone()[0]
            latest_sources = [dict(r) for r in conn.execute(
                "SELECT source_id, title, ingested_at FROM sources WHERE status = 'active'"
                " ORDER BY ingested_at DESC LIMIT 5")]
            latest_pages = [dict(r) for r in conn.execute(
                f"SELECT page_id, title, page_type, updated_at FROM pages WHERE page_id IN ({visible})"
                " ORDER BY updated_at DESC LIMIT 5")]
        return {"sources": {"active": sources.get("active", 0), "archived": sources.get("archived", 0)},
                "pages": {"total": sum(by_type.values()), "by_type": by_type}, "drafts_pending": drafts,
                "latest_sources": latest_sources, "latest_pages": latest_pages}

    def get_source(source_id: str, include_archived: bool = False, offset: int = 0,
                   max_chars: int = MAX_SOURCE_CHARS) -> dict:
        """A source's converted markdown and metadata. Long texts come in parts: pass `offset`
        (the previous `next_offset`) for the next part. Archived sources only with include_archived."""
        from kompl.ingest import store as sources

        with _connect(ws) as conn:
            row = sources.get(conn, source_id)
        if row is None or (row["status"] != "active" and not include_archived):
            raise NotFoundError(f"No source {source_id!r}", hint="read_page lists a page's sources")
        text = sources.read_markdown(ws, source_id)
        offset, max_chars = max(0, int(offset)), max(1, min(int(max_chars), MAX_SOURCE_CHARS))
        part = text[offset : offset + max_chars]
        end = offset + len(part)
        return {"source_id": source_id, "metadata": {k: v for k, v in row.items() if k != "original_sha256"},
                "text": part, "offset": offset, "total_chars": len(text),
                "next_offset": end if end < len(text) else None}

    def related_pages(page: str, limit: int = 20) -> dict:
        """Pages related to one page: those it links to, those linking to it, and those built
        from the same sources (with how many sources they share)."""
        from kompl.wiki import store

        visible = store.visible_page_ids_sql()
        limit = max(1, min(int(limit), 100))
        with _connect(ws) as conn:
            row = _visible_page(conn, page)
            pid = row["page_id"]
            out_links = conn.execute(
                f"SELECT DISTINCT p.page_id, p.title, p.page_type FROM page_links l JOIN pages p ON p.page_id = l.to_page"
                f" WHERE l.from_page = ? AND p.page_id IN ({visible}) AND p.page_id != ? ORDER BY p.title LIMIT ?",
                (pid, pid, limit)).fetchall()
            in_links = conn.execute(
                f"SELECT DISTINCT p.page_id, p.title, p.page_type FROM page_links l JOIN pages p ON p.page_id = l.from_page"
                f" WHERE l.to_page = ? AND p.page_id IN ({visible}) AND p.page_id != ? ORDER BY p.title LIMIT ?",
                (pid, pid, limit)).fetchall()
            shared = conn.execute(
                "SELECT p.page_id, p.title, p.page_type, COUNT(*) AS shared_sources"
                " FROM page_sources mine JOIN sources s ON s.source_id = mine.source_id AND s.status = 'active'"
                " JOIN page_sources other ON other.source_id = mine.source_id AND other.page_id != mine.page_id"
                f" JOIN pages p ON p.page_id = other.page_id WHERE mine.page_id = ? AND p.page_id IN ({visible})"
                " GROUP BY p.page_id ORDER BY shared_sources DESC, p.title LIMIT ?", (pid, limit)).fetchall()
        return {"page_id": pid, "title": row["title"], "links_out": [dict(r) for r in out_links],
                "links_in": [dict(r) for r in in_links], "shared_sources": [dict(r) for r in shared]}

    return {f.__name__: f for f in (search_wiki, read_page, list_pages, wiki_stats, get_source, related_pages)}


def build_server(ws: Workspace, *, vector_index: Any = None):
    """The MCPServer with kompl's read-only tools registered (imports the SDK)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from kompl import __version__

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    for name, fn in tools(ws, vector_index=vector_index).items():
        server.add_tool(_reporting(fn, ToolError), name=name, description=fn.__doc__)
    return server


def _reporting(fn: Callable[..., dict], tool_error: type[Exception]) -> Callable[..., dict]:
    """Turn kompl's errors into tool errors the client sees (message and hint), not a crash."""
    import functools

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> dict:
        try:
            return fn(*args, **kwargs)
        except KomplError as exc:
            raise tool_error(str(exc)) from None

    return call


def serve(ws: Workspace) -> None:
    """Run the server on stdin/stdout until the client disconnects."""
    build_server(ws).run("stdio")


__all__ = ["build_server", "serve", "tools"]
