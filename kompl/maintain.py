"""Source maintenance: archive, unarchive, delete and recompile one source, and what follows from it.

A source's statements live on in pages, drafts, the full-text index and the
vectors. These cascades take them out (or bring them back) everywhere at once:

- `archive`: the source leaves every read path and the promotion counts. Pages
  that only archived sources support are hidden by the readers' own filter
  (`wiki.store.visible_page_ids_sql`), never deleted. A page that other sources
  support as well gets a new, mechanical version without the statements that
  cite only the archived source (`redact_text`, author `kompl/archive`), so search,
  ask, chat and MCP stop showing them at once, without a model call. Open plans
  and drafts that read the source are superseded (approving them would bring its
  text back) and re-planned without it. One transaction with an `archive` audit row.
- `unarchive`: the reverse. A page whose current version is an archive redaction
  gets its earlier text back (minus sources still archived); a page that changed
  since is re-planned with the source as a new one (`kompl compile` drafts it).
- `delete`: contribution-aware and crash-safe. The source is first archived (out of
  every read path), then each step is idempotent, so running `delete` again after
  a crash completes the job: (1) pages only it supports get status 'deleted'
  (history kept), their files, FTS rows and vectors go; (2) pages other sources
  support are redacted at once (author `kompl/delete`; the page keeps the source in
  its provenance rows as a pending removal) and re-planned with it in
  `removed_sources` (`plan.replan_without`), and those plans are drafted right
  away, so a model rewrite without it waits in the outbox; (3) open plans that used
  it are superseded and re-planned; (4) the row goes, and with it (cascade) its
  extraction, mentions, claims, relationships and conflicts, and the aliases and
  entities only its names created (manual merges are kept); (5) its raw file and
  original go (unless another source shares the bytes). Re-ingesting the same bytes
  later starts clean.
- `recompile`: re-extract one source (forced), then resolve, judge conflicts,
  plan what its pages need and draft those plans.

Nothing here prints; each function returns a `SourceReport`.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from kompl import db, faults
from kompl.errors import KomplError, NotFoundError
from kompl.workspace import Workspace

__all__ = [
    "ARCHIVER", "DELETER", "AmbiguousSourceError", "SourceReport", "archive", "delete", "find_source",
    "recompile", "redact_text", "unarchive",
]

ARCHIVER = "kompl/archive"  # author of the mechanical versions archive and unarchive write
DELETER = "kompl/delete"  # author of the versions delete writes
_SOURCE_ID = re.compile(r"^src-[0-9a-f]{12}$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


class AmbiguousSourceError(KomplError):
    """A SOURCE argument matches more than one source."""


@dataclass
class SourceReport:
    """What one maintenance command changed (every list holds small dicts or ids)."""

    action: str
    source: dict
    changed: bool = False
    hidden_pages: list[dict] = field(default_factory=list)  # archive: pages now supported only by archived sources
    redacted_pages: list[dict] = field(default_factory=list)  # {page_id, title, version, statements}
    restored_pages: list[dict] = field(default_factory=list)  # unarchive: {page_id, title, version}
    deleted_pages: list[dict] = field(default_factory=list)  # delete: {page_id, title, page_key}
    plans_superseded: list[dict] = field(default_factory=list)  # {plan_id, page_key}
    plans_created: list[dict] = field(default_factory=list)  # {plan_id, page_key, title, action}
    drafted: list[int] = field(default_factory=list)
    draft_noop: list[int] = field(default_factory=list)  # re-drafts equal to the (already redacted) page
    draft_failed: list[dict] = field(default_factory=list)
    approved: list[int] = field(default_factory=list)
    aliases_pruned: list[dict] = field(default_factory=list)  # {alias, norm, kind, entity_id}
    entities_pruned: list[str] = field(default_factory=list)
    files_removed: dict = field(default_factory=dict)
    vectors: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)  # recompile: each stage's report
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# --- finding the source --------------------------------------------------------------------------

def find_source(conn: sqlite3.Connection, ref: str) -> dict:
    """The source `ref` names: its id (or a unique id prefix), or a unique title / input match.

    Exact matches win over partial ones. Raises NotFoundError or AmbiguousSourceError.
    """
    from kompl.ingest import store

    text = (ref or "").strip()
    if not text:
        raise NotFoundError("No source given", hint="name one by id or title; list them with `kompl sources`")
    row = store.get(conn, text)
    if row:
        return row
    everything = store.list_sources(conn)
    low = text.casefold()
    tiers = [
        [s for s in everything if low.startswith("src-") and s["source_id"].startswith(low)],
        [s for s in everything if s["title"].casefold() == low or s["input"] == text
         or (s["input"] or "").rsplit("/", 1)[-1] == text or (s["url"] or "") == text],
        [s for s in everything if low in s["title"].casefold() or low in (s["input"] or "").casefold()],
    ]
    for found in tiers:
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = "; ".join(f"{s['source_id']} ({s['title']})" for s in found[:5])
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            raise AmbiguousSourceError(f"{ref!r} matches {len(found)} sources: {names}{more}",
                                       hint="name the source by its id (see `kompl sources`)")
    raise NotFoundError(f"No source matches {ref!r}", hint="list sources with `kompl sources`")


def _brief(source: dict) -> dict:
    return {"source_id": source["source_id"], "title": source.get("title", ""),
            "status": source.get("status", "deleted"), "input": source.get("input", "")}


# --- redaction -------------------------------------------------------------------------------------

def redact_text(body: str, removed: set[str]) -> tuple[str, int]:
    """`body` (markdown, links stripped) without the statements whose citations name only
    `removed` sources, and without those ids in mixed citations. Returns (text, statements removed).

    Lines that introduced a list all of whose items went ("From *Title*:") go too.
    """
    from kompl.pipeline.draft import remove_cited

    text, dropped = remove_cited(body, removed)
    if not dropped:
        return text, 0
    lines = text.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.endswith(":") and not _LIST_ITEM.match(line) and not stripped.startswith("#"):
            nxt = next((l for l in lines[i + 1:] if l.strip()), "")
            if not _LIST_ITEM.match(nxt) and not nxt.startswith((" ", "\t")):
                continue
        keep.append(line)
    # A heading left with nothing under it (before the next heading of its level or higher) goes too.
    final: list[str] = []
    for i, line in enumerate(keep):
        heading = re.match(r"^(#{1,6})\s", line)
        if heading:
            rest = keep[i + 1:]
            end = next((j for j, l in enumerate(rest) if re.match(rf"^#{{1,{len(heading.group(1))}}}\s", l)),
                       len(rest))
            if not any(l.strip() for l in rest[:end]):
                continue
        final.append(line)
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(final)).strip()
    out = re.sub(r"\]\.\.(?=\s|$)", "].", out)
    return (out + "\n") if out else "", dropped


def _plain(text: str) -> str:
    from kompl.pipeline.draft import CITATION, strip_links

    return re.sub(r"\s+", " ", CITATION.sub("", strip_links(text or ""))).strip()


def _rewrite(ws: Workspace, conn: sqlite3.Connection, page: dict, text: str, archived: set[str],
             db_sources: list[tuple[str, str]], *, author: str, reason: str, summary: str | None = None
             ) -> tuple[dict | None, int]:
    """Commit `text` (a page version) without the statements of `archived`, links re-injected.

    Returns (the new page row or None when nothing changed, statements removed).
    """
    from kompl.pipeline.draft import first_sentence, strip_links
    from kompl.wiki import markdown as md
    from kompl.wiki import store as wiki

    try:
        meta, body = md.parse_page(text)
    except ValueError:
        meta, body = {}, md.split_frontmatter(text)[1]
    new_body, dropped = redact_text(strip_links(body).strip() + "\n", archived)
    fm_sources = [s for s in (meta.get("sources") or []) if s not in archived]
    summary = summary if summary is not None else page["summary"]
    if dropped and _plain(summary) and _plain(summary)[:60] not in _plain(new_body):
        summary = first_sentence(_plain(new_body))  # the old summary may have said what only they said
    meta.update(title=page["title"], summary=summary, sources=fm_sources, updated=db.utcnow())
    targets = wiki.link_targets(conn)
    full = md.render_page(meta, md.inject_links(new_body, targets, self_title=page["title"]))
    write = wiki.PageWrite(page_key=page["page_key"], page_type=page["page_type"], title=page["title"], body="",
                           sources=db_sources, author=author, category=page["category"], summary=summary,
                           aliases=tuple(page["aliases"]), reason=reason)
    row, changed = wiki.commit_version(ws, conn, write, text=full)
    return (row if changed else None), dropped


def _contributions(conn: sqlite3.Connection, page_id: int) -> dict[str, str]:
    return {r[0]: r[1] for r in conn.execute("SELECT source_id, contribution FROM page_sources WHERE page_id = ?",
                                             (page_id,))}


def _redact_page(ws: Workspace, conn: sqlite3.Connection, page: dict, source_id: str, *, keep_provenance: bool,
                 author: str, reason: str) -> dict | None:
    """Take `source_id`'s statements out of a page's current version (idempotent)."""
    from kompl.wiki import markdown as md
    from kompl.wiki import store as wiki

    text = wiki.content(conn, page["page_id"])
    contributions = _contributions(conn, page["page_id"])
    try:
        listed = set(md.parse_page(text)[0].get("sources") or [])
    except ValueError:
        listed = set()
    cited = f"{source_id}" in md.split_frontmatter(text)[1]
    if not (cited or source_id in listed or (not keep_provenance and source_id in contributions)):
        return None
    db_sources = sorted((s, c) for s, c in contributions.items() if keep_provenance or s != source_id)
    row, dropped = _rewrite(ws, conn, page, text, {source_id}, db_sources, author=author, reason=reason)
    if row is None:
        return None
    return {"page_id": row["page_id"], "title": row["title"], "page_key": row["page_key"], "version": row["version"],
            "statements": dropped}


# --- shared steps ------------------------------------------------------------------------------------

def _pages_citing(conn: sqlite3.Connection, source_id: str) -> list[dict]:
    """Active pages (hidden ones too) with `source_id` in their provenance, or its own source page."""
    from kompl.wiki import store as wiki

    return [p for p in wiki.list_pages(conn, include_hidden=True)
            if source_id in p["sources"] or p["page_key"] == f"source:{source_id}"]


def _supersede_plans_using(conn: sqlite3.Connection, source_id: str, reason: str) -> list[dict]:
    """Close open plans whose draft reads `source_id` (call inside a transaction)."""
    from kompl.pipeline import plan as planner

    closed = []
    for key, plan in planner.open_plans(conn).items():
        inputs = plan["inputs"]
        uses = source_id in inputs.get("sources", []) or source_id in inputs.get("new_sources", [])
        if uses or key == f"source:{source_id}":
            planner.supersede(conn, plan["plan_id"], reason)
            closed.append({"plan_id": plan["plan_id"], "page_key": key})
    return closed


def _sync_vectors(ws: Workspace, conn: sqlite3.Connection, page_ids: list[int]) -> dict:
    if not page_ids:
        return {}
    try:
        from kompl import vectors

        return dict(vectors.sync_pages(ws, conn, sorted(set(page_ids))) or {})
    except Exception as exc:  # noqa: BLE001 - the database is done; `kompl doctor --fix` brings vectors in step
        return {"error": f"{type(exc).__name__}: {exc}", "deferred": sorted(set(page_ids)),
                "hint": "run `kompl doctor --fix` to bring the vectors in step"}


def _restore_files(ws: Workspace, conn: sqlite3.Connection, page_ids: list[int]) -> None:
    """After a rolled-back transaction: put back the files its page versions wrote."""
    from kompl.wiki import store as wiki

    for pid in page_ids:
        row = conn.execute("SELECT page_id, slug, version, status FROM pages WHERE page_id = ?", (pid,)).fetchone()
        if row and row["status"] == "active":
            try:
                wiki.write_files(ws, conn, dict(row))
            except (OSError, KomplError):
                pass  # repaired by the start of the next command (reconcile_files)


def _written_by(conn: sqlite3.Connection, author: str, source_id: str) -> list[int]:
    rows = conn.execute("SELECT DISTINCT page_id FROM page_versions WHERE author = ? AND reason LIKE ?",
                        (author, f"%{source_id}%"))
    return [r[0] for r in rows]


# --- archive / unarchive -------------------------------------------------------------------------------

def archive(ws: Workspace, conn: sqlite3.Connection, ref: str) -> SourceReport:
    """Take a source out of every read path and the promotion counts (reversible with `unarchive`)."""
    from kompl.ingest import store
    from kompl.pipeline import plan as planner
    from kompl.wiki import store as wiki

    src = find_source(conn, ref)
    sid = src["source_id"]
    report = SourceReport("archive", _brief(src))
    details: dict[str, Any] = {"title": src["title"]}
    written: list[int] = []
    try:
        with db.transaction(conn, "archive", target=sid, details=details):
            report.changed = store.set_status(conn, sid, "archived")
            report.plans_superseded = _supersede_plans_using(conn, sid, f"source {sid} archived")
            citing = _pages_citing(conn, sid)
            for page in citing:
                if not [s for s in page["sources"] if s != sid]:
                    continue  # hidden whole by the readers' filter, kept as it is for unarchive
                done = _redact_page(ws, conn, page, sid, keep_provenance=False, author=ARCHIVER,
                                    reason=f"archive {sid}: its statements hidden")
                if done:
                    written.append(done["page_id"])
                    report.redacted_pages.append(done)
            visible = {p["page_id"] for p in wiki.list_pages(conn)}
            report.hidden_pages = [{"page_id": p["page_id"], "title": p["title"]} for p in citing
                                   if p["page_id"] not in visible]
            keys = sorted({p["page_key"] for p in report.plans_superseded} | {p["page_key"] for p in report.redacted_pages})
            if keys:
                replanned = planner.plan_pending(ws, conn, page_keys=keys)
                report.plans_created = replanned.created
                report.plans_superseded += [s for s in replanned.superseded if s not in report.plans_superseded]
            details.update(changed=report.changed, hidden=[p["page_id"] for p in report.hidden_pages],
                           redacted=[p["page_id"] for p in report.redacted_pages],
                           superseded=[p["plan_id"] for p in report.plans_superseded],
                           planned=[p["plan_id"] for p in report.plans_created])
    except BaseException:
        _restore_files(ws, conn, written)
        raise
    report.source["status"] = "archived"
    # A re-run after a crash also catches up the vectors of pages redacted before it.
    report.vectors = _sync_vectors(ws, conn, written + _written_by(conn, ARCHIVER, sid))
    if report.plans_created:
        report.notes.append(f"{len(report.plans_created)} page(s) re-planned without it: `kompl compile` drafts them")
    return report


def unarchive(ws: Workspace, conn: sqlite3.Connection, ref: str) -> SourceReport:
    """Bring an archived source back: its hidden pages reappear, redacted pages get its statements back."""
    from kompl.ingest import store
    from kompl.pipeline import plan as planner
    from kompl.wiki import store as wiki

    src = find_source(conn, ref)
    sid = src["source_id"]
    report = SourceReport("unarchive", _brief(src))
    details: dict[str, Any] = {"title": src["title"]}
    written: list[int] = []
    try:
        with db.transaction(conn, "unarchive", target=sid, details=details):
            report.changed = store.set_status(conn, sid, "active")
            for pid in _written_by(conn, ARCHIVER, sid):
                done = _restore_page(ws, conn, pid, sid)
                if done:
                    written.append(pid)
                    report.restored_pages.append(done)
            report.hidden_pages = []
            replanned = planner.plan_pending(ws, conn, source_ids=[sid])
            report.plans_created = replanned.created
            report.plans_superseded = replanned.superseded
            details.update(changed=report.changed, restored=written,
                           planned=[p["plan_id"] for p in report.plans_created])
    except BaseException:
        _restore_files(ws, conn, written)
        raise
    report.source["status"] = "active"
    visible = {p["page_id"] for p in wiki.list_pages(conn)}
    report.hidden_pages = [{"page_id": p["page_id"], "title": p["title"]} for p in _pages_citing(conn, sid)
                           if p["page_id"] not in visible]
    report.vectors = _sync_vectors(ws, conn, written)
    if report.plans_created:
        report.notes.append(f"{len(report.plans_created)} page(s) changed since the archive were re-planned "
                            "with it: `kompl compile` drafts them")
    return report


def _restore_page(ws: Workspace, conn: sqlite3.Connection, page_id: int, source_id: str) -> dict | None:
    """Undo archive redactions: the last version not written by the archiver, minus sources still archived."""
    from kompl.ingest import store
    from kompl.review import CONTRIBUTION
    from kompl.wiki import markdown as md
    from kompl.wiki import store as wiki

    page = wiki.get(conn, page_id)
    if page["status"] != "active":
        return None
    versions = wiki.history(conn, page_id)
    if not versions or versions[-1]["author"] != ARCHIVER:
        return None  # changed since: the planner adds the source back as a new one
    base = next((v for v in reversed(versions) if v["author"] != ARCHIVER), None)
    if base is None:
        return None
    text = wiki.content(conn, page_id, base["version"])
    try:
        meta = md.parse_page(text)[0]
    except ValueError:
        meta = {}
    listed = list(meta.get("sources") or [])
    rows = {s: store.get(conn, s) for s in listed}
    still_out = {s for s, row in rows.items() if row is None or row["status"] != "active"}
    contributions = _contributions(conn, page_id)
    how = CONTRIBUTION.get(page["page_type"], "cited")
    for s in listed:
        if s not in still_out:
            contributions.setdefault(s, how)
    db_sources = sorted((s, c) for s, c in contributions.items() if s not in still_out or s not in listed)
    row, _dropped = _rewrite(ws, conn, page, text, still_out, db_sources, author=ARCHIVER,
                             reason=f"unarchive {source_id}: its statements restored",
                             summary=str(meta.get("summary") or page["summary"]))
    if row is None:
        return None
    return {"page_id": row["page_id"], "title": row["title"], "version": row["version"]}


# --- delete ---------------------------------------------------------------------------------------------

def _leftover_info(conn: sqlite3.Connection, source_id: str) -> dict | None:
    """For a delete that crashed after the row went: what the first run recorded."""
    rows = db.activity(conn, action="delete_started")
    mine = [r for r in rows if r["target"] == source_id]
    if not mine:
        return None
    return {"source_id": source_id, **mine[-1]["details"], "status": "deleted"}


def _find_for_delete(conn: sqlite3.Connection, ref: str) -> tuple[dict, bool]:
    """(source, row exists). A source whose row is gone but whose delete was started is resumed."""
    try:
        return find_source(conn, ref), True
    except NotFoundError:
        text = (ref or "").strip()
        info = _leftover_info(conn, text) if _SOURCE_ID.match(text) else None
        if info is None:
            raise
        return info, False


def delete(ws: Workspace, conn: sqlite3.Connection, ref: str, *, gateway: Any = None) -> SourceReport:
    """Delete a source and everything only it supported (see the module docstring for the steps)."""
    src, exists = _find_for_delete(conn, ref)
    sid = src["source_id"]
    report = SourceReport("delete", _brief(src))
    report.changed = exists
    if exists:
        _begin_delete(conn, src)
    faults.point("delete.after_archive")
    _delete_or_redact_pages(ws, conn, sid, report)
    faults.point("delete.after_pages")
    touched = [p["page_id"] for p in _pages_citing(conn, sid)] + _written_by(conn, DELETER, sid)
    # Vectors follow at once: a stale chunk would still show its sentences in search snippets.
    report.vectors = _sync_vectors(ws, conn, touched + [p["page_id"] for p in report.deleted_pages])
    _replan(ws, conn, sid, report, gateway)
    faults.point("delete.after_replan")
    _delete_row(conn, src, report, resumed=not exists)
    faults.point("delete.after_row")
    report.files_removed = _remove_files(ws, conn, src)
    deleted = [r[0] for r in conn.execute("SELECT page_id FROM page_sources WHERE source_id = ?", (sid,))]
    final = _sync_vectors(ws, conn, touched + deleted + [p["page_id"] for p in report.deleted_pages] + report.approved)
    for key in ("embedded_pages", "embedded_chunks", "deleted_pages"):
        final[key] = final.get(key, 0) + report.vectors.get(key, 0)
    report.vectors = {**report.vectors, **final}
    report.source["status"] = "deleted"
    if report.drafted:
        report.notes.append(f"{len(report.drafted)} update(s) drafted without it wait in the outbox "
                            "(`kompl drafts`); the pages already no longer show its statements")
    return report


def _begin_delete(conn: sqlite3.Connection, src: dict) -> None:
    """Step 0: out of every read path and the planner at once (an archive), recorded for a resume."""
    from kompl.ingest import store

    keep = {k: src.get(k) for k in ("title", "input", "original_name", "content_hash", "original_sha256")}
    with db.transaction(conn, "delete_started", target=src["source_id"], details=keep):
        store.set_status(conn, src["source_id"], "archived")


def _delete_page(ws: Workspace, conn: sqlite3.Connection, page: dict, reason: str) -> None:
    from kompl.wiki import store as wiki

    wiki.delete_page(ws, conn, page, reason)


def _delete_or_redact_pages(ws: Workspace, conn: sqlite3.Connection, sid: str, report: SourceReport) -> None:
    """Steps 1 and 2: pages only it supports are deleted, the others lose its statements now."""
    from kompl.ingest import store

    for page in _pages_citing(conn, sid):
        others = [s for s in page["sources"] if s != sid and store.get(conn, s) is not None]
        if page["page_key"] == f"source:{sid}" or not others:
            _delete_page(ws, conn, page, f"source {sid} deleted: it was the page's only source")
            report.deleted_pages.append({"page_id": page["page_id"], "title": page["title"],
                                         "page_key": page["page_key"]})
            continue
        # The source stays in the page's provenance rows until the re-draft without it is approved:
        # that is how the planner knows the removal is still pending.
        done = _redact_page(ws, conn, page, sid, keep_provenance=True, author=DELETER,
                            reason=f"delete {sid}: its statements taken out")
        if done:
            report.redacted_pages.append(done)


def _replan(ws: Workspace, conn: sqlite3.Connection, sid: str, report: SourceReport, gateway: Any) -> None:
    """Step 3: re-plan pages without it, supersede and re-plan open plans that used it, draft them."""
    from kompl import review
    from kompl.pipeline import draft
    from kompl.pipeline import plan as planner

    without = planner.replan_without(ws, conn, sid)
    report.plans_created += without.created
    report.plans_superseded += without.superseded
    with db.transaction(conn):
        closed = _supersede_plans_using(conn, sid, f"source {sid} deleted")
    report.plans_superseded += closed
    if closed:
        again = planner.plan_pending(ws, conn, page_keys=sorted({c["page_key"] for c in closed}))
        report.plans_created += again.created
    created = {p["plan_id"] for p in report.plans_created}
    todo = [p["plan_id"] for p in planner.open_plans(conn).values()
            if p["status"] in ("planned", "failed")
            and (p["plan_id"] in created or sid in p["inputs"].get("removed_sources", []))]
    if todo:
        drafted = draft.draft_pending(ws, conn, gateway=gateway, plan_ids=todo)
        report.drafted = [d["plan_id"] for d in drafted.drafted]
        report.draft_noop = [d["plan_id"] for d in drafted.noop]
        report.draft_failed = drafted.failed
        if ws.settings.auto_approve and report.drafted:
            approved = review.approve(ws, conn, report.drafted)
            report.approved = [a["plan_id"] for a in approved.approved]
    _drop_provenance(conn, sid)


def _drop_provenance(conn: sqlite3.Connection, sid: str) -> None:
    """The pages' text no longer holds its statements and the re-plans carry it in
    `removed_sources`: it leaves their provenance rows (so the same bytes ingested again
    count as a new source for them)."""
    from kompl.wiki import store as wiki

    wiki.drop_source(conn, sid)


def _delete_row(conn: sqlite3.Connection, src: dict, report: SourceReport, *, resumed: bool) -> None:
    """Step 4: the row (cascading its extraction) and the names only it gave, with the `delete` audit row."""
    from kompl.ingest import store

    sid = src["source_id"]
    details: dict[str, Any] = {"title": src.get("title", ""), "resumed": resumed}
    with db.transaction(conn, "delete", target=sid, details=details):
        norms = [(r[0], r[1]) for r in conn.execute("SELECT DISTINCT norm, kind FROM entity_mentions"
                                                     " WHERE source_id = ?", (sid,))]
        store.delete_source(conn, sid)
        report.aliases_pruned, report.entities_pruned = _prune_names(conn, norms)
        details.update(deleted_pages=[p["page_id"] for p in report.deleted_pages],
                       redacted_pages=[p["page_id"] for p in report.redacted_pages],
                       superseded=[p["plan_id"] for p in report.plans_superseded],
                       planned=[p["plan_id"] for p in report.plans_created], drafted=report.drafted,
                       aliases_pruned=[a["alias"] for a in report.aliases_pruned],
                       entities_pruned=report.entities_pruned)


def _prune_names(conn: sqlite3.Connection, norms: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    """Aliases of names no remaining source mentions, and entities left with no name (manual merges stay).

    Call inside the transaction that deleted the mentions.
    FIXME(issue 6): belongs in kompl.pipeline.resolve (owner of aliases and entities).
    """
    from kompl.pipeline import resolve

    pruned: list[dict] = []
    touched: set[str] = set()
    for norm, kind in norms:
        if conn.execute("SELECT 1 FROM entity_mentions WHERE norm = ? AND kind = ? LIMIT 1", (norm, kind)).fetchone():
            continue
        for row in conn.execute("SELECT id, alias, entity_id FROM aliases WHERE norm = ? AND kind = ?"
                                " AND layer != 'manual'", (norm, kind)).fetchall():
            conn.execute("DELETE FROM aliases WHERE id = ?", (row["id"],))
            touched.add(row["entity_id"])
            pruned.append({"alias": row["alias"], "norm": norm, "kind": kind, "entity_id": row["entity_id"]})
    entities: list[str] = []
    now = db.utcnow()
    for eid in sorted(touched):
        if conn.execute("SELECT 1 FROM entities WHERE entity_id = ?", (eid,)).fetchone() is None:
            continue
        family = _absorbed(conn, eid)
        marks = ",".join("?" * len(family))
        keeps = conn.execute(f"SELECT 1 FROM aliases WHERE entity_id IN ({marks})"
                             " AND (status = 'merged' OR layer = 'manual') LIMIT 1", family).fetchone()
        if keeps:
            resolve._refresh_entity(conn, eid, None, now)  # its canonical name may have been one of the pruned
            continue
        conn.execute(f"DELETE FROM aliases WHERE entity_id IN ({marks})", family)
        for member in reversed(family):  # absorbed ones first: they point at the survivor
            conn.execute("DELETE FROM entities WHERE entity_id = ?", (member,))
            entities.append(member)
    return pruned, entities


def _absorbed(conn: sqlite3.Connection, eid: str) -> list[str]:
    """`eid` and every entity merged into it, directly or not (parents before children)."""
    family, queue = [eid], [eid]
    while queue:
        cur = queue.pop(0)
        for row in conn.execute("SELECT entity_id FROM entities WHERE merged_into = ?", (cur,)):
            if row[0] not in family:
                family.append(row[0])
                queue.append(row[0])
    return family


def _remove_files(ws: Workspace, conn: sqlite3.Connection, src: dict) -> dict:
    """Step 5: the raw file, and the original unless another source shares its bytes."""
    from kompl.ingest import store

    return store.remove_source_files(ws, conn, src["source_id"], src.get("original_name"))


# --- recompile ----------------------------------------------------------------------------------------------

def recompile(ws: Workspace, conn: sqlite3.Connection, ref: str, *, gateway: Any = None,
              model: str | None = None) -> SourceReport:
    """Re-extract one source (even if up to date), then resolve, judge conflicts, plan what its
    pages need and draft those plans (approved at once with `auto_approve`)."""
    from kompl import review
    from kompl.llm import Gateway
    from kompl.pipeline import conflicts, draft, resolve
    from kompl.pipeline import plan as planner
    from kompl.pipeline.extract import extract_pending

    src = find_source(conn, ref)
    sid = src["source_id"]
    if src["status"] != "active":
        raise KomplError(f"Source {sid} ({src['title']}) is {src['status']}: it is not compiled",
                         hint=f"bring it back first with `kompl unarchive {sid}`")
    report = SourceReport("recompile", _brief(src))
    gw = gateway or Gateway(ws, conn, model=model)
    ex = extract_pending(ws, conn, source_ids=[sid], force=True, gateway=gw)
    report.stages["extract"] = ex.to_dict()
    if ex.failed:
        report.notes.append(f"extraction failed: {ex.failed[0]['error']}")
        return report
    report.stages["resolve"] = resolve.resolve(ws, conn, gateway=gw).to_dict()
    found = conflicts.find_conflicts(ws, conn, gateway=gw)
    report.stages["conflicts"] = found.to_dict() if hasattr(found, "to_dict") else {}
    planned = planner.plan_pending(ws, conn, source_ids=[sid])
    report.stages["plan"] = planned.to_dict()
    report.plans_created = planned.created
    report.plans_superseded = planned.superseded
    ids = [p["plan_id"] for p in planned.created]
    if ids:
        drafted = draft.draft_pending(ws, conn, gateway=gw, plan_ids=ids)
        report.drafted = [d["plan_id"] for d in drafted.drafted]
        report.draft_failed = drafted.failed
        if ws.settings.auto_approve and report.drafted:
            report.approved = [a["plan_id"] for a in review.approve(ws, conn, report.drafted).approved]
    report.changed = bool(ex.extracted)
    if not ids:
        report.notes.append("its pages rest on the same text as before: nothing to re-plan")
    return report
