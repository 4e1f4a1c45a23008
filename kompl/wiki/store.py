"""The page store: pages, every version, provenance, links, full-text rows, and the files.

This module owns the `pages`, `page_versions`, `page_sources`, `page_links` and
`pages_fts` tables. `commit_version()` writes a new version of a page in ONE
transaction (with its audit row); the markdown file and history file are then
written atomically. The database is the truth: `reconcile_files()` rewrites a
missing or stale file from it, and takes a file edited by hand in as a new,
human-authored version instead of overwriting it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kompl import db, faults, files
from kompl.errors import NotFoundError
from kompl.wiki import markdown as md
from kompl.workspace import Workspace

PAGE_COLUMNS = "page_id, page_key, page_type, title, slug, category, summary, aliases, version, content_hash, status, created_at, updated_at"
HUMAN = "human"
LINKER = "kompl/linker"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PageWrite:
    """What a new version of a page consists of."""

    page_key: str
    page_type: str
    title: str
    body: str
    sources: list[tuple[str, str]]  # (source_id, contribution)
    author: str  # model name, 'human' or 'kompl/linker'
    category: str = "other"
    summary: str = ""
    aliases: tuple[str, ...] = ()
    plan_id: int | None = None
    reason: str = ""


# --- reading ---------------------------------------------------------------------------

def _page(row: sqlite3.Row | None) -> dict | None:
    if row is None:
        return None
    out = dict(row)
    out["aliases"] = json.loads(out["aliases"])
    return out


def get_by_key(conn: sqlite3.Connection, page_key: str) -> dict | None:
    return _page(conn.execute(f"SELECT {PAGE_COLUMNS} FROM pages WHERE page_key = ?", (page_key,)).fetchone())


def get(conn: sqlite3.Connection, ref: str | int) -> dict:
    """A page by id, slug, key or title (case-insensitive)."""
    text = str(ref)
    row = None
    if text.isdigit():
        row = conn.execute(f"SELECT {PAGE_COLUMNS} FROM pages WHERE page_id = ?", (int(text),)).fetchone()
    for column in ("slug", "page_key"):
        row = row or conn.execute(f"SELECT {PAGE_COLUMNS} FROM pages WHERE {column} = ?", (text,)).fetchone()
    row = row or conn.execute(
        f"SELECT {PAGE_COLUMNS} FROM pages WHERE title = ? COLLATE NOCASE ORDER BY page_id LIMIT 1", (text,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"No page {ref!r}", hint="list pages with `kompl pages`")
    return _page(row)


def list_pages(conn: sqlite3.Connection, *, page_type: str | None = None, include_hidden: bool = False) -> list[dict]:
    """Active pages. Pages whose sources are all archived are hidden unless asked for."""
    sql = f"SELECT {PAGE_COLUMNS} FROM pages WHERE status = 'active'"
    args: list = []
    if page_type:
        sql += " AND page_type = ?"
        args.append(page_type)
    if not include_hidden:
        sql += f" AND page_id IN ({visible_page_ids_sql()})"
    pages = [_page(r) for r in conn.execute(sql + " ORDER BY page_type, title", args)]
    for page in pages:
        page["sources"] = page_source_ids(conn, page["page_id"])
    return pages


def visible_page_ids_sql() -> str:
    """SQL selecting ids of pages with at least one active source, or with no sources at all."""
    return (
        "SELECT p.page_id FROM pages p WHERE p.status = 'active' AND ("
        " NOT EXISTS (SELECT 1 FROM page_sources ps WHERE ps.page_id = p.page_id)"
        " OR EXISTS (SELECT 1 FROM page_sources ps JOIN sources s ON s.source_id = ps.source_id"
        "            WHERE ps.page_id = p.page_id AND s.status = 'active'))"
    )


def page_source_ids(conn: sqlite3.Connection, page_id: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT source_id FROM page_sources WHERE page_id = ? ORDER BY source_id", (page_id,))]


def content(conn: sqlite3.Connection, page_id: int, version: int | None = None) -> str:
    if version is None:
        row = conn.execute(
            "SELECT v.content FROM page_versions v JOIN pages p ON p.page_id = v.page_id AND p.version = v.version"
            " WHERE p.page_id = ?", (page_id,)).fetchone()
    else:
        row = conn.execute("SELECT content FROM page_versions WHERE page_id = ? AND version = ?", (page_id, version)).fetchone()
    if row is None:
        raise NotFoundError(f"Page {page_id} has no version {version}", hint="see `kompl history PAGE`")
    return row[0]


def history(conn: sqlite3.Connection, page_id: int) -> list[dict]:
    rows = conn.execute(
        "SELECT version, content_hash, author, plan_id, reason, created_at FROM page_versions"
        " WHERE page_id = ? ORDER BY version", (page_id,)).fetchall()
    return [dict(r) for r in rows]


def link_targets(conn: sqlite3.Connection) -> dict[str, str]:
    """name -> page title for every visible page title and alias (what links can point at)."""
    targets: dict[str, str] = {}
    rows = conn.execute(f"SELECT title, aliases FROM pages WHERE page_id IN ({visible_page_ids_sql()})").fetchall()
    for title, aliases in rows:
        for alias in json.loads(aliases):
            targets.setdefault(alias, title)
    for title, _ in rows:
        targets[title] = title  # a title always wins over another page's alias
    return targets


def page_path(ws: Workspace, slug: str) -> Path:
    return ws.pages_dir / f"{slug}.md"


def history_path(ws: Workspace, slug: str, version: int) -> Path:
    return ws.history_dir / slug / f"{version}.md"


# --- writing ---------------------------------------------------------------------------

def _unique_slug(conn: sqlite3.Connection, title: str) -> str:
    base = md.slugify(title)
    slug, n = base, 2
    while conn.execute("SELECT 1 FROM pages WHERE slug = ?", (slug,)).fetchone():
        slug, n = f"{base}-{n}", n + 1
    return slug


def render(page: PageWrite, *, updated: str, targets: dict[str, str]) -> str:
    meta = {
        "title": page.title, "page_type": page.page_type, "category": page.category,
        "summary": page.summary, "sources": sorted({s for s, _ in page.sources}),
        "model": page.author, "updated": updated,
    }
    body = md.inject_links(page.body.strip() + "\n", targets, self_title=page.title)
    return md.render_page(meta, body)


def commit_version(ws: Workspace, conn: sqlite3.Connection, page: PageWrite, *, text: str | None = None) -> tuple[dict, bool]:
    """Write a new version of `page` (creating the page if needed). Returns (page row, changed).

    An update whose text equals the current version is a no-op (changed=False).
    `text` (full page text) bypasses rendering, for hand-edited versions.
    """
    now = db.utcnow()
    with db.transaction(conn):
        existing = get_by_key(conn, page.page_key)
        targets = link_targets(conn)
        for alias in page.aliases:
            targets.setdefault(alias, page.title)
        full = text if text is not None else render(page, updated=now, targets=targets)
        digest = sha256(full)
        if existing and existing["status"] == "active" and _same_content(conn, existing, full):
            return existing, False
        if existing is None:
            slug = _unique_slug(conn, page.title)
            cur = conn.execute(
                "INSERT INTO pages (page_key, page_type, title, slug, category, summary, aliases, version,"
                " content_hash, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (page.page_key, page.page_type, page.title, slug, page.category, page.summary,
                 json.dumps(list(page.aliases)), 1, digest, "active", now, now),
            )
            page_id, version = cur.lastrowid, 1
        else:
            page_id, version, slug = existing["page_id"], existing["version"] + 1, existing["slug"]
            conn.execute(
                "UPDATE pages SET page_type=?, title=?, category=?, summary=?, aliases=?, version=?, content_hash=?,"
                " status='active', updated_at=? WHERE page_id=?",
                (page.page_type, page.title, page.category, page.summary, json.dumps(list(page.aliases)),
                 version, digest, now, page_id),
            )
        conn.execute(
            "INSERT INTO page_versions (page_id, version, content, content_hash, author, plan_id, reason, created_at)"
            " VALUES (?,?,?,?,?,?,?,?)", (page_id, version, full, digest, page.author, page.plan_id, page.reason, now))
        conn.execute("DELETE FROM page_sources WHERE page_id = ?", (page_id,))
        conn.executemany("INSERT OR REPLACE INTO page_sources (page_id, source_id, contribution) VALUES (?,?,?)",
                         [(page_id, s, c) for s, c in page.sources])
        index_page(conn, page_id, page.title, full)
        relink_targets(conn, page.title, page.aliases, page_id)
        db.log_activity(conn, "page_commit", target=page.page_key, actor=page.author,
                        details={"page_id": page_id, "version": version, "plan_id": page.plan_id, "reason": page.reason})
    faults.point("page.after_db_commit")
    row = get_by_key(conn, page.page_key)
    write_files(ws, conn, row)
    faults.point("page.after_file_write")
    return row, True


def _same_content(conn: sqlite3.Connection, existing: dict, full: str) -> bool:
    """Equal apart from the `updated:` stamp (a re-draft that changes nothing is a no-op)."""
    current = content(conn, existing["page_id"])
    strip = lambda t: "\n".join(line for line in t.splitlines() if not line.startswith("updated:"))  # noqa: E731
    return strip(current) == strip(full)


def index_page(conn: sqlite3.Connection, page_id: int, title: str, full: str) -> None:
    """(Re)write a page's full-text row and its outgoing links from its full text."""
    _meta, body = md.split_frontmatter(full)
    conn.execute("DELETE FROM pages_fts WHERE page_id = ?", (page_id,))
    conn.execute("INSERT INTO pages_fts (title, body, page_id) VALUES (?,?,?)", (title, body, page_id))
    conn.execute("DELETE FROM page_links WHERE from_page = ?", (page_id,))
    for target in md.wikilinks(full):
        row = conn.execute(
            "SELECT page_id FROM pages WHERE status='active' AND title = ? COLLATE NOCASE LIMIT 1", (target,)).fetchone()
        conn.execute("INSERT OR IGNORE INTO page_links (from_page, to_title, to_page) VALUES (?,?,?)",
                     (page_id, target, row[0] if row else None))


def relink_targets(conn: sqlite3.Connection, title: str, aliases: Iterable[str], page_id: int) -> None:
    """Links written before this page existed now resolve to it."""
    for name in (title, *aliases):
        conn.execute("UPDATE page_links SET to_page = ? WHERE to_page IS NULL AND to_title = ? COLLATE NOCASE",
                     (page_id, name))


def reindex(conn: sqlite3.Connection, page_id: int) -> None:
    """Rebuild one page's full-text row and links from its current version."""
    row = conn.execute("SELECT title FROM pages WHERE page_id = ?", (page_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"No page {page_id}")
    index_page(conn, page_id, row[0], content(conn, page_id))


def delete_page(ws: Workspace, conn: sqlite3.Connection, page: dict, reason: str) -> None:
    """Status 'deleted': its file, full-text row and links go; versions and history files stay."""
    with db.transaction(conn, "page_delete", target=page["page_key"],
                        details={"page_id": page["page_id"], "version": page["version"], "reason": reason}):
        conn.execute("UPDATE pages SET status = 'deleted', updated_at = ? WHERE page_id = ?",
                     (db.utcnow(), page["page_id"]))
        conn.execute("DELETE FROM pages_fts WHERE page_id = ?", (page["page_id"],))
        conn.execute("DELETE FROM page_links WHERE from_page = ?", (page["page_id"],))
        conn.execute("UPDATE page_links SET to_page = NULL WHERE to_page = ?", (page["page_id"],))
    files.remove_quietly(page_path(ws, page["slug"]))


def drop_source(conn: sqlite3.Connection, source_id: str) -> None:
    """Remove a source from the provenance of active pages (deleted pages keep theirs, as history)."""
    with db.transaction(conn):
        conn.execute("DELETE FROM page_sources WHERE source_id = ? AND page_id IN"
                     " (SELECT page_id FROM pages WHERE status = 'active')", (source_id,))


def write_files(ws: Workspace, conn: sqlite3.Connection, page: dict) -> None:
    """Project the current version (and its history file) to disk, atomically."""
    text = content(conn, page["page_id"])
    hist = history_path(ws, page["slug"], page["version"])
    if not hist.exists():
        files.atomic_write_text(hist, text)
    files.atomic_write_text(page_path(ws, page["slug"]), text)


def link_pass(ws: Workspace, conn: sqlite3.Connection, page_ids: Iterable[int]) -> list[int]:
    """Pages that mention the given (new) pages gain links to them, each as one new version.

    Every page is considered, the new ones too: a batch of new pages links to each
    other whatever order they were committed in.
    """
    new_pages = [get(conn, pid) for pid in page_ids]
    if not new_pages:
        return []
    targets = link_targets(conn)
    names = [n.casefold() for p in new_pages for n in (p["title"], *p["aliases"])]
    changed = []
    for other in list_pages(conn):
        text = content(conn, other["page_id"])
        front, body = md.split_frontmatter(text)
        if not any(n in body.casefold() for n in names):
            continue
        linked = front + md.inject_links(body, targets, self_title=other["title"])
        if linked != text:
            write = PageWrite(page_key=other["page_key"], page_type=other["page_type"], title=other["title"],
                              body="", sources=[(s, "cited") for s in other["sources"]], author=LINKER,
                              category=other["category"], summary=other["summary"], aliases=tuple(other["aliases"]),
                              reason="link pass: links to new pages")
            _row, did = commit_version(ws, conn, write, text=linked)
            if did:
                changed.append(other["page_id"])
    return changed


# --- projections -------------------------------------------------------------------------

def reconcile_files(ws: Workspace, conn: sqlite3.Connection, *, fix: bool = True) -> list[dict]:
    """Compare page files with the database and repair them.

    - file missing, or equal to an older version (a crash before the write, or a
      stale copy): rewritten from the database;
    - file different from every version: edited by hand, taken in as a new
      version authored by 'human' (never overwritten);
    - history files missing: rewritten.
    Returns what was found (and fixed when `fix`).
    """
    findings = []
    for page in conn.execute(f"SELECT {PAGE_COLUMNS} FROM pages WHERE status = 'active'").fetchall():
        page = _page(page)
        path = page_path(ws, page["slug"])
        on_disk = path.read_text(encoding="utf-8") if path.exists() else None
        if on_disk is not None and sha256(on_disk) == page["content_hash"]:
            missing_hist = [v["version"] for v in history(conn, page["page_id"])
                            if not history_path(ws, page["slug"], v["version"]).exists()]
            if missing_hist and fix:
                for version in missing_hist:
                    files.atomic_write_text(history_path(ws, page["slug"], version), content(conn, page["page_id"], version))
            continue
        known = {r[0] for r in conn.execute("SELECT content_hash FROM page_versions WHERE page_id = ?", (page["page_id"],))}
        if on_disk is None or sha256(on_disk) in known:
            kind = "missing_file" if on_disk is None else "stale_file"
            findings.append({"page_id": page["page_id"], "slug": page["slug"], "problem": kind})
            if fix:
                write_files(ws, conn, page)
        else:
            findings.append({"page_id": page["page_id"], "slug": page["slug"], "problem": "edited_by_hand"})
            if fix:
                adopt_hand_edit(ws, conn, page, on_disk)
    return findings


def adopt_hand_edit(ws: Workspace, conn: sqlite3.Connection, page: dict, text: str) -> None:
    try:
        meta, body = md.parse_page(text)
    except ValueError:
        meta, body = {}, text
    write = PageWrite(
        page_key=page["page_key"], page_type=page["page_type"], title=str(meta.get("title") or page["title"]),
        body=body, sources=[(s, "cited") for s in page_source_ids(conn, page["page_id"])], author=HUMAN,
        category=page["category"], summary=str(meta.get("summary") or page["summary"]),
        aliases=tuple(page["aliases"]), reason="edited by hand on disk",
    )
    commit_version(ws, conn, write, text=text)
