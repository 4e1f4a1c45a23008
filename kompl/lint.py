"""`kompl lint`: check the committed wiki, report (and with fix, repair what is safe), store the findings.

This module owns the `lint_runs` and `lint_findings` tables (m011). `run_lint()`
runs the checks below over ACTIVE pages, stores the run and its findings in one
transaction with a `lint` audit row, and returns a `LintReport`.

Deterministic checks (their names are the `check` of each finding):

- `drift` (warning; a lost raw file is an error): page files, vectors and raw
  source files out of step with the database (`kompl.doctor.check`), and the
  full-text rows (`pages_fts`) of a page missing or different from its current version.
- `invalid_frontmatter` (error): the current version's frontmatter does not
  parse, lacks a field of `FRONTMATTER_FIELDS`, or disagrees with the database
  about title, page_type or sources.
- `broken_link` (warning): a `[[link]]` that resolves to no page, a deleted page,
  or a page hidden because its sources are archived.
- `orphan_page` (info): a visible page no other visible page links to. Overview
  and saved-answer pages are entry points and never orphans; a source page is not
  an orphan while another page cites its source (readers reach it from the citation).
- `no_provenance` (warning): a page with no sources (overview pages excepted:
  they are built from other pages, not from sources).
- `sources_inactive`: every source of the page is archived or deleted (its row
  is gone). Info when they are all archived: archiving is a deliberate, reversible
  choice and the page is already hidden from readers; warning when one was deleted
  (the delete should have removed or re-planned the page).
- `stale_page` (warning), checked for visible pages with no open plan (a plan
  waiting in the outbox is the fix on its way): the page's basis is the latest
  version not written by the linker, dated by the plan it was drafted from
  (or by its own commit for human and direct versions). The page is stale when
  a cited active source was extracted after that basis, when it still cites a
  deleted source, or (entity/concept pages) when an active source mentions the
  entity but the page does not cite it.
- `duplicate_entity` (warning): two entity/concept pages whose keys the alias
  table resolves to one entity (a merge after both pages were made).
- `missing_page` (warning): a live entity mentioned in at least
  `entity_promotion_threshold` active sources, not of a junk type, with no page,
  no open plan and no rejected plan (a tombstone is a reviewer's decision).

Plus `contradiction`: the claim-level scan of `kompl.pipeline.conflicts` judges
the pairs not judged before, and every 'contradicts' between active sources is
reported with both sources, claims and quotes: info when an approved comparison
page covers it, warning when none does.

`fix=True` repairs what is safe and never deletes content: drift through
`kompl.doctor.check(fix=True)` (files rewritten, hand edits taken in, vectors
re-embedded), full-text rows rebuilt, and broken links whose name now resolves
relinked (`[[Old]]` becomes `[[Title|Old]]` in a new version by the linker).

Exit code (`LintReport.exit_code`): 0 when no error or warning remains (info
findings do not fail a run), 1 when one does, 2 when a check could not run
(e.g. the model for the contradiction scan failed).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from kompl import db
from kompl.errors import EXIT_ERROR, EXIT_FAILURES, EXIT_OK, KomplError, NotFoundError
from kompl.workspace import Workspace

__all__ = ["CHECKS", "LintReport", "due", "last_run", "run_lint"]

DETERMINISTIC = ("drift", "invalid_frontmatter", "broken_link", "orphan_page", "no_provenance", "sources_inactive",
                 "stale_page", "duplicate_entity", "missing_page")
CHECKS = DETERMINISTIC + ("contradiction",)
SEVERITIES = ("error", "warning", "info")
NOT_ORPHANS = frozenset({"overview", "answer"})  # entry points: reached from the index, not from links
NO_SOURCES_OK = frozenset({"overview"})
_LINK = re.compile(r"\[\[([^\]\n|#]+)((?:[#|][^\]\n]*)?)\]\]")


@dataclass
class LintReport:
    started_at: str = ""
    checked_at: str = ""  # when the run finished
    fix: bool = False
    checks: list[str] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)  # {check, severity, page_id, page_title, message, details, fixed}
    checked: dict[str, int] = field(default_factory=dict)  # pages, links, sources, entities, claims, pairs_judged
    errors: list[str] = field(default_factory=list)  # what could not be checked, and why
    timings_ms: dict[str, int] = field(default_factory=dict)
    run_id: int | None = None

    def add(self, check: str, severity: str, message: str, *, page: dict | None = None, page_id: int | None = None,
            fixed: bool = False, **details: Any) -> dict:
        finding = {"check": check, "severity": severity,
                   "page_id": page["page_id"] if page else page_id,
                   "page_title": page["title"] if page else None,
                   "message": message, "details": details, "fixed": fixed}
        self.findings.append(finding)
        return finding

    @property
    def remaining(self) -> list[dict]:
        return [f for f in self.findings if not f["fixed"]]

    @property
    def counts(self) -> dict[str, Any]:
        by_check: dict[str, int] = defaultdict(int)
        by_severity = {s: 0 for s in SEVERITIES}
        for f in self.remaining:
            by_check[f["check"]] += 1
            by_severity[f["severity"]] += 1
        fixed = len(self.findings) - len(self.remaining)
        return {"total": len(self.findings), "remaining": len(self.remaining), "fixed": fixed,
                "by_check": dict(sorted(by_check.items())), "by_severity": by_severity}

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_ERROR
        return EXIT_FAILURES if any(f["severity"] != "info" for f in self.remaining) else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "checked_at": self.checked_at, "started_at": self.started_at, "fix": self.fix,
                "checks": self.checks, "counts": self.counts, "checked": self.checked, "errors": self.errors,
                "timings_ms": self.timings_ms, "findings": self.findings}


# --- the run ------------------------------------------------------------------------------------

def run_lint(ws: Workspace, conn: sqlite3.Connection, *, fix: bool = False, gateway: Any = None,
             model: str | None = None, checks: list[str] | tuple[str, ...] | None = None) -> LintReport:
    """Run `checks` (default: all), repair what is safe when `fix`, store the run. See the module docstring."""
    wanted = list(CHECKS) if not checks else list(dict.fromkeys(checks))
    unknown = [c for c in wanted if c not in CHECKS]
    if unknown:
        raise KomplError(f"Unknown lint check(s): {', '.join(unknown)}", hint=f"known checks: {', '.join(CHECKS)}")
    report = LintReport(started_at=db.utcnow(), fix=fix, checks=[c for c in CHECKS if c in wanted])
    t0 = time.perf_counter()

    def timed(name: str, fn, *args) -> None:
        start = time.perf_counter()
        fn(*args)
        report.timings_ms[name] = report.timings_ms.get(name, 0) + int((time.perf_counter() - start) * 1000)

    if "drift" in wanted:  # first: with fix, hand edits are taken in before the content checks read the pages
        timed("drift", _check_drift, ws, conn, report, fix)
    if any(c in wanted for c in DETERMINISTIC if c != "drift"):
        start = time.perf_counter()
        wiki = _Wiki.load(ws, conn)
        report.timings_ms["load"] = int((time.perf_counter() - start) * 1000)
        report.checked.update(pages=len(wiki.pages), links=len(wiki.links), sources=len(wiki.sources))
        for name, fn in (("invalid_frontmatter", _check_frontmatter), ("broken_link", _check_links),
                         ("orphan_page", _check_orphans), ("no_provenance", _check_provenance),
                         ("sources_inactive", _check_inactive_sources), ("stale_page", _check_stale),
                         ("duplicate_entity", _check_duplicates), ("missing_page", _check_missing_pages)):
            if name in wanted:
                timed(name, fn, ws, conn, wiki, report, fix)
    if "contradiction" in wanted:
        timed("contradiction", _check_contradictions, ws, conn, report, gateway, model)
    report.checked_at = db.utcnow()
    report.timings_ms["total"] = int((time.perf_counter() - t0) * 1000)
    _store(conn, report)
    return report


@dataclass
class _Wiki:
    """Everything the deterministic checks read, loaded once."""

    pages: dict[int, dict]  # active pages (hidden ones too), with "sources" and "visible"
    deleted: set[int]
    links: list[tuple[int, str, int | None]]  # (from_page, to_title, to_page)
    sources: dict[str, dict]  # every source row
    texts: dict[int, str]  # current version text of each active page
    open_plans: dict[str, dict]

    @classmethod
    def load(cls, ws: Workspace, conn: sqlite3.Connection) -> "_Wiki":
        from kompl.ingest import store as source_store
        from kompl.pipeline import plan as planner
        from kompl.wiki import store

        pages = {p["page_id"]: p for p in store.list_pages(conn, include_hidden=True)}
        visible = {r[0] for r in conn.execute(store.visible_page_ids_sql())}
        for pid, page in pages.items():
            page["visible"] = pid in visible
        deleted = {r[0] for r in conn.execute("SELECT page_id FROM pages WHERE status != 'active'")}
        links = [(r[0], r[1], r[2]) for r in conn.execute("SELECT from_page, to_title, to_page FROM page_links")]
        texts = {r[0]: r[1] for r in conn.execute(
            "SELECT v.page_id, v.content FROM page_versions v JOIN pages p ON p.page_id = v.page_id"
            " AND p.version = v.version WHERE p.status = 'active'")}
        sources = {s["source_id"]: s for s in source_store.list_sources(conn)}
        return cls(pages, deleted, links, sources, texts, planner.open_plans(conn))


# --- drift: files, vectors, raw sources, full-text rows -------------------------------------------

def _check_drift(ws: Workspace, conn: sqlite3.Connection, report: LintReport, fix: bool) -> None:
    from kompl import doctor

    found = doctor.check(ws, conn, fix=fix)
    for item in found.findings:
        details = {k: v for k, v in item.items() if k not in ("message", "fixed", "page_id")}
        severity = "error" if item["problem"] == "missing_raw_file" else "warning"
        report.add("drift", severity, item["message"], page_id=item.get("page_id"), fixed=item["fixed"], **details)
    report.errors.extend(f"drift: {note}" for note in found.notes if "deferred" not in note)
    _check_fts(conn, report, fix)


def _check_fts(conn: sqlite3.Connection, report: LintReport, fix: bool) -> None:
    from kompl.wiki import markdown as md
    from kompl.wiki import store

    rows: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for page_id, title, body in conn.execute("SELECT page_id, title, body FROM pages_fts"):
        rows[int(page_id)].append((title, body))
    current = conn.execute(
        "SELECT p.page_id, p.title, v.content FROM pages p JOIN page_versions v ON v.page_id = p.page_id"
        " AND v.version = p.version WHERE p.status = 'active'").fetchall()
    active = set()
    for page_id, title, text in current:
        active.add(page_id)
        have = rows.get(page_id, [])
        want = (title, md.split_frontmatter(text)[1])
        if have == [want]:
            continue
        problem = "missing_fts" if not have else "stale_fts"
        done = False
        if fix:
            # Until the store exposes a public re-index, its own indexer rebuilds the row (and the page's links).
            with db.transaction(conn):
                store.index_page(conn, page_id, title, text)
            done = True
        what = "has no full-text row" if problem == "missing_fts" else "has a full-text row that differs from its current version"
        report.add("drift", "warning", f"page {page_id} {what}" + (" (rebuilt)" if done else ""),
                   page_id=page_id, fixed=done, area="fts", problem=problem)
    for page_id in sorted(set(rows) - active):
        report.add("drift", "warning", f"full-text rows of page {page_id}, which is deleted or unknown "
                   "(search hides them; the store removes them when the page is deleted)",
                   page_id=page_id, area="fts", problem="orphaned_fts")


# --- page content ----------------------------------------------------------------------------------

def _check_frontmatter(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    from kompl.wiki import markdown as md

    for pid, page in wiki.pages.items():
        text = wiki.texts.get(pid, "")
        try:
            meta, _body = md.parse_page(text)
        except ValueError as exc:
            report.add("invalid_frontmatter", "error", f"frontmatter does not parse: {exc}", page=page)
            continue
        if not md.split_frontmatter(text)[0]:
            report.add("invalid_frontmatter", "error", "the page has no frontmatter", page=page)
            continue
        missing = [f for f in md.FRONTMATTER_FIELDS if f not in meta]
        if missing:
            report.add("invalid_frontmatter", "error", f"frontmatter lacks {', '.join(missing)}", page=page,
                       missing=missing)
        wrong = {}
        if "title" in meta and str(meta["title"]) != page["title"]:
            wrong["title"] = {"frontmatter": meta["title"], "database": page["title"]}
        if "page_type" in meta and str(meta["page_type"]) != page["page_type"]:
            wrong["page_type"] = {"frontmatter": meta["page_type"], "database": page["page_type"]}
        if "sources" in meta:
            listed = meta["sources"] if isinstance(meta["sources"], list) else [meta["sources"]]
            if sorted({str(s) for s in listed if s}) != sorted(page["sources"]):
                wrong["sources"] = {"frontmatter": listed, "database": page["sources"]}
        if wrong:
            report.add("invalid_frontmatter", "error",
                       f"frontmatter disagrees with the database about {', '.join(wrong)}", page=page, disagrees=wrong)


def _check_links(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    from kompl.wiki import store

    names = {n.casefold(): t for n, t in store.link_targets(conn).items()}
    titles = {p["title"].casefold(): p for p in wiki.pages.values() if p["visible"]}
    broken: dict[int, list[tuple[str, str | None, str]]] = defaultdict(list)
    for from_page, to_title, to_page in wiki.links:
        page = wiki.pages.get(from_page)
        if page is None or not page["visible"]:
            continue
        target = wiki.pages.get(to_page) if to_page is not None else None
        if target is not None and target["visible"]:
            continue
        if to_page is None:
            why = "no page has this title"
        elif to_page in wiki.deleted:
            why = "its page was deleted"
        else:
            why = "its page is hidden (all its sources are archived)"
        resolved = names.get(to_title.casefold())
        if resolved is not None and resolved.casefold() == page["title"].casefold():
            resolved = None  # never relink a page to itself
        broken[from_page].append((to_title, resolved, why))
    for from_page, items in sorted(broken.items()):
        page = wiki.pages[from_page]
        done = bool(fix and any(r for _, r, _ in items) and _relink(ws, conn, page, items))
        for to_title, resolved, why in items:
            fixable = resolved is not None and resolved.casefold() in titles
            note = f"; it now names {resolved!r}" if fixable else ""
            report.add("broken_link", "warning", f"[[{to_title}]] is broken: {why}{note}"
                       + (" (relinked)" if done and fixable else ""), page=page,
                       fixed=done and fixable, link=to_title, reason=why, resolves_to=resolved if fixable else None)


def _relink(ws: Workspace, conn: sqlite3.Connection, page: dict, items: list[tuple[str, str | None, str]]) -> bool:
    """Point the page's broken links at the titles their names resolve to now, as one linker version."""
    from kompl.wiki import markdown as md
    from kompl.wiki import store

    fixes = {t: r for t, r, _ in items if r}
    text = store.content(conn, page["page_id"])
    front, body = md.split_frontmatter(text)

    def repl(match: re.Match) -> str:
        name, rest = match.group(1).strip(), match.group(2)
        title = fixes.get(name)
        if title is None:
            return match.group(0)
        if rest.startswith("|") or rest.startswith("#"):
            return f"[[{title}{rest}]]"
        return f"[[{title}]]" if title == name else f"[[{title}|{name}]]"

    linked = front + _LINK.sub(repl, body)
    if linked == text:  # the text already names the title: only the link index is behind
        with db.transaction(conn):
            store.index_page(conn, page["page_id"], page["title"], text)
        return True
    contributions = conn.execute("SELECT source_id, contribution FROM page_sources WHERE page_id = ?"
                                 " ORDER BY source_id", (page["page_id"],)).fetchall()
    write = store.PageWrite(page_key=page["page_key"], page_type=page["page_type"], title=page["title"], body="",
                            sources=[(r[0], r[1]) for r in contributions], author=store.LINKER,
                            category=page["category"], summary=page["summary"], aliases=tuple(page["aliases"]),
                            reason="lint --fix: relink broken links to pages that now exist")
    _row, changed = store.commit_version(ws, conn, write, text=linked)
    if changed:
        _sync_vectors(ws, conn, [page["page_id"]])
    return changed


def _sync_vectors(ws: Workspace, conn: sqlite3.Connection, page_ids: list[int]) -> None:
    from kompl import vectors

    try:
        vectors.sync_pages(ws, conn, page_ids)
    except Exception:  # noqa: BLE001 - the page is committed; `kompl doctor --fix` (or the next lint --fix) catches up
        pass


def _check_orphans(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    inbound = {to for frm, _t, to in wiki.links
               if to is not None and frm != to and wiki.pages.get(frm, {}).get("visible")}
    cited: set[str] = set()
    for page in wiki.pages.values():
        if page["visible"] and not page["page_key"].startswith("source:"):
            cited.update(page["sources"])
    for pid, page in wiki.pages.items():
        if not page["visible"] or pid in inbound or page["page_type"] in NOT_ORPHANS:
            continue
        if page["page_key"].startswith("source:") and page["page_key"].partition(":")[2] in cited:
            continue
        report.add("orphan_page", "info", "no other page links to it", page=page)


def _check_provenance(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    for page in wiki.pages.values():
        if not page["sources"] and page["page_type"] not in NO_SOURCES_OK:
            report.add("no_provenance", "warning", "the page cites no source", page=page)


def _check_inactive_sources(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    for page in wiki.pages.values():
        if not page["sources"]:
            continue
        archived = [s for s in page["sources"] if wiki.sources.get(s, {}).get("status") == "archived"]
        deleted = [s for s in page["sources"] if s not in wiki.sources]
        if len(archived) + len(deleted) < len(page["sources"]):
            continue
        parts = ([f"{len(archived)} archived"] if archived else []) + ([f"{len(deleted)} deleted"] if deleted else [])
        hidden = " (hidden from readers)" if archived and not deleted else ""
        report.add("sources_inactive", "warning" if deleted else "info",
                   f"none of its sources is active: {', '.join(parts)}{hidden}",
                   page=page, archived=archived, deleted=deleted)


def _check_stale(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    from kompl.pipeline import resolve
    from kompl.wiki import store

    basis = {r[0]: r[1] for r in conn.execute(
        "SELECT v.page_id, COALESCE(pl.created_at, v.created_at) FROM page_versions v"
        " LEFT JOIN page_plans pl ON pl.plan_id = v.plan_id WHERE v.author != ? AND v.version ="
        " (SELECT MAX(w.version) FROM page_versions w WHERE w.page_id = v.page_id AND w.author != ?)",
        (store.LINKER, store.LINKER))}
    extracted = {r[0]: r[1] for r in conn.execute("SELECT source_id, extracted_at FROM extractions")}
    for pid, page in wiki.pages.items():
        if not page["visible"] or page["page_key"] in wiki.open_plans or pid not in basis:
            continue
        since = basis[pid]
        active = [s for s in page["sources"] if wiki.sources.get(s, {}).get("status") == "active"]
        reasons: list[str] = []
        details: dict[str, Any] = {"basis": since}
        newer = [s for s in active if extracted.get(s, "") > since]
        if newer:
            reasons.append(f"{len(newer)} source(s) re-extracted since it was drafted")
            details["re_extracted"] = newer
        gone = [s for s in page["sources"] if s not in wiki.sources]
        if gone:
            reasons.append(f"it still cites {len(gone)} deleted source(s)")
            details["deleted_sources"] = gone
        kind, _, key = page["page_key"].partition(":")
        if kind in ("entity", "concept") and key:
            entity = resolve.canonical_for(conn, key)
            if entity is not None:
                extra = sorted(set(resolve.entity_sources(conn, entity["entity_id"])) - set(page["sources"]))
                extra = [s for s in extra if s in extracted]
                if extra:
                    reasons.append(f"{len(extra)} newer source(s) mention it and are not planned yet")
                    details["unplanned_sources"] = extra
        if reasons:
            report.add("stale_page", "warning", "; ".join(reasons) + " (run `kompl compile`)", page=page, **details)


def _entity_pages(conn: sqlite3.Connection, wiki: _Wiki) -> dict[str, list[dict]]:
    """live entity id -> the active entity/concept pages keyed by it (or by an entity merged into it)."""
    from kompl.pipeline import resolve

    out: dict[str, list[dict]] = defaultdict(list)
    for page in wiki.pages.values():
        kind, _, key = page["page_key"].partition(":")
        if kind in ("entity", "concept") and key:
            entity = resolve.canonical_for(conn, key)
            out[entity["entity_id"] if entity else key].append(page)
    return out


def _check_duplicates(ws, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    by_entity = _entity_pages(conn, wiki)
    report.checked["entity_pages"] = sum(len(p) for p in by_entity.values())
    for eid, pages in sorted(by_entity.items()):
        if len(pages) < 2:
            continue
        pages = sorted(pages, key=lambda p: p["page_id"])
        for page in pages[1:]:
            report.add("duplicate_entity", "warning",
                       f"same entity as page {pages[0]['page_id']} ({pages[0]['title']!r}) by the alias table",
                       page=page, entity_id=eid, duplicate_of=pages[0]["page_id"])


def _check_missing_pages(ws: Workspace, conn, wiki: _Wiki, report: LintReport, fix: bool) -> None:
    from kompl.pipeline import plan as planner
    from kompl.pipeline import resolve

    threshold = max(1, ws.settings.entity_promotion_threshold)
    have = set(_entity_pages(conn, wiki))
    extracted = {r[0] for r in conn.execute("SELECT source_id FROM extractions")}
    rejected = {r[0] for r in conn.execute("SELECT DISTINCT page_key FROM tombstones")}
    entities = resolve.list_entities(conn, active_only=True)
    report.checked["entities"] = len(entities)
    for e in entities:
        srcs = [s for s in e["sources"] if s in extracted]
        if len(srcs) < threshold or (e["type"] or "").upper() in planner.JUNK_TYPES or e["entity_id"] in have:
            continue
        kind = "concept" if e["kind"] == "concept" else "entity"
        key = f"{kind}:{e['entity_id']}"
        if key in wiki.open_plans or key in rejected:
            continue
        report.add("missing_page", "warning",
                   f"{e['canonical_name']!r} is mentioned in {len(srcs)} active sources but has no page "
                   "(run `kompl compile`)", entity_id=e["entity_id"], name=e["canonical_name"], sources=srcs)


# --- contradictions ----------------------------------------------------------------------------------

def _check_contradictions(ws: Workspace, conn: sqlite3.Connection, report: LintReport, gateway: Any,
                          model: str | None) -> None:
    from kompl.pipeline import conflicts
    from kompl.wiki import store

    scan = conflicts.find_conflicts(ws, conn, gateway=gateway, model=model)
    report.checked.update(claims=scan.claims, claim_pairs=scan.survivors, pairs_judged=scan.judged)
    report.errors.extend(f"contradiction scan: {e}" for e in scan.errors)
    covered: dict[int, dict] = {}
    for key, inputs in conn.execute("SELECT page_key, inputs FROM page_plans WHERE page_type = 'comparison'"
                                    " AND status IN ('approved', 'noop') ORDER BY plan_id"):
        page = store.get_by_key(conn, key)
        if page is None or page["status"] != "active":
            continue
        for cid in json.loads(inputs or "{}").get("conflict_ids", []):
            covered[int(cid)] = page
    entity_pages: dict[str, dict] = {}
    for row in conflicts.list_conflicts(conn, verdict="contradicts"):
        page = covered.get(row["conflict_id"])
        eid = row["entity_id"]
        if page is None and eid:
            if eid not in entity_pages:
                entity_pages[eid] = store.get_by_key(conn, f"entity:{eid}") or store.get_by_key(conn, f"concept:{eid}")
            page = entity_pages[eid]
        a, b = row["a"], row["b"]
        where = (f"covered by the comparison page {page['title']!r}" if row["conflict_id"] in covered
                 else "no comparison page covers it yet")
        message = (f"{row['topic'] or 'claims'}: “{a['claim']}” ({a['source_title']}) vs “{b['claim']}” "
                   f"({b['source_title']}); {where}")
        report.add("contradiction", "info" if row["conflict_id"] in covered else "warning", message, page=page,
                   conflict_id=row["conflict_id"], topic=row["topic"], entity_id=eid, confidence=row["confidence"],
                   reason=row["reason"], model=row["model"], covered=row["conflict_id"] in covered,
                   a={k: a[k] for k in ("source_id", "source_title", "claim", "quote")},
                   b={k: b[k] for k in ("source_id", "source_title", "claim", "quote")})


# --- storing and reading runs ----------------------------------------------------------------------------

def _store(conn: sqlite3.Connection, report: LintReport) -> None:
    counts = report.counts
    complete = set(report.checks) == set(CHECKS)
    with db.transaction(conn) as tx:
        c = report.checked
        cur = tx.execute(
            "INSERT INTO lint_runs (started_at, finished_at, complete, fix, checks, pages_checked, links_checked,"
            " sources_checked, entities_checked, claims_checked, pairs_judged, findings, fixed, counts, errors,"
            " duration_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (report.started_at, report.checked_at, int(complete), int(report.fix), json.dumps(report.checks),
             c.get("pages", 0), c.get("links", 0), c.get("sources", 0), c.get("entities", 0), c.get("claims", 0),
             c.get("pairs_judged", 0), len(report.findings), counts["fixed"],
             json.dumps({**counts, "checked": c, "timings_ms": report.timings_ms}), json.dumps(report.errors),
             report.timings_ms.get("total", 0)))
        report.run_id = cur.lastrowid
        tx.executemany(
            "INSERT INTO lint_findings (run_id, check_name, severity, page_id, message, details, fixed)"
            " VALUES (?,?,?,?,?,?,?)",
            [(report.run_id, f["check"], f["severity"], f["page_id"], f["message"],
              json.dumps({**f["details"], "page_title": f["page_title"]}, ensure_ascii=False, default=str),
              int(f["fixed"])) for f in report.findings])
        db.log_activity(tx, "lint", target=f"lint_run:{report.run_id}", actor="kompl/lint",
                        details={"run_id": report.run_id, "findings": counts["remaining"], "fixed": counts["fixed"],
                                 "fix": report.fix, "by_check": counts["by_check"],
                                 "checks": "all" if complete else report.checks, "errors": len(report.errors)})


def last_run(conn: sqlite3.Connection, *, complete_only: bool = False) -> LintReport | None:
    """The latest stored run, rebuilt as a LintReport (None when lint never ran)."""
    sql = "SELECT * FROM lint_runs" + (" WHERE complete = 1" if complete_only else "") + " ORDER BY finished_at DESC, id DESC LIMIT 1"
    row = conn.execute(sql).fetchone()
    if row is None:
        return None
    extra = json.loads(row["counts"] or "{}")
    report = LintReport(started_at=row["started_at"], checked_at=row["finished_at"], fix=bool(row["fix"]),
                        checks=json.loads(row["checks"]), checked=extra.get("checked", {}),
                        errors=json.loads(row["errors"]), timings_ms=extra.get("timings_ms", {}), run_id=row["id"])
    for f in conn.execute("SELECT * FROM lint_findings WHERE run_id = ? ORDER BY id", (row["id"],)):
        details = json.loads(f["details"] or "{}")
        title = details.pop("page_title", None)
        report.findings.append({"check": f["check_name"], "severity": f["severity"], "page_id": f["page_id"],
                                "page_title": title, "message": f["message"], "details": details,
                                "fixed": bool(f["fixed"])})
    return report


def require_last_run(conn: sqlite3.Connection) -> LintReport:
    report = last_run(conn)
    if report is None:
        raise NotFoundError("No lint run is stored yet", hint="run `kompl lint`")
    return report


def due(ws: Workspace, conn: sqlite3.Connection, *, now: datetime | None = None) -> tuple[bool, str, dict]:
    """(is a lint due, why, facts) — due when no complete run finished within `lint_interval_hours`."""
    hours = float(ws.settings.lint_interval_hours)
    last = last_run(conn, complete_only=True)
    facts: dict[str, Any] = {"interval_hours": hours, "last_run": None, "due_at": None}
    if last is None:
        return True, "no complete lint run is stored yet", facts
    now = now or datetime.now(timezone.utc)
    finished = _parse_time(last.checked_at)
    due_at = finished + timedelta(hours=hours)
    facts.update(last_run=last.checked_at, last_run_id=last.run_id, due_at=_iso(due_at))
    age_h = (now - finished).total_seconds() / 3600
    if now >= due_at:
        return True, f"the last complete lint finished {age_h:.1f} h ago (interval {hours:g} h)", facts
    return False, (f"not due: the last complete lint (run {last.run_id}) finished {age_h:.1f} h ago, at "
                   f"{last.checked_at}; the interval is {hours:g} h, so the next is due at {_iso(due_at)}"), facts


def _parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
