"""The outbox service: list drafts, diff them, approve (commit) or reject (tombstone) them.

Interface-agnostic: nothing here prints or prompts. The human decision sits
behind the `Reviewer` protocol (a terminal asks a person, tests play back a
script); `approve()` and `reject()` are what the CLI commands call. Approving a
plan commits its draft through `kompl.wiki.store.commit_version`, links older
pages to a new page (`link_pass`), and updates the vector index when
`kompl.vectors` is installed. A draft whose page changed since it was planned is
stale: it is re-planned, never committed over the newer page. Each decision is
its own transaction with an audit row, so one failing plan never stops the others.
"""

from __future__ import annotations

import difflib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Protocol

from kompl import db, faults
from kompl.errors import KomplError, NotFoundError
from kompl.pipeline import plan as planner
from kompl.wiki import store as wiki
from kompl.workspace import Workspace

__all__ = [
    "ALL", "ApproveReport", "Draft", "RejectReport", "ReviewSummary", "Reviewer", "Verdict", "approve",
    "approve_all_if_auto", "diff", "list_drafts", "page_diff", "page_write_for", "reject", "review_outbox",
]

ALL = "all"
OUTBOX = ("drafted",)
EVERY_STATUS = ("planned", "drafted", "failed", "approved", "rejected", "superseded", "noop")
CONTRIBUTION = {"source": "summary", "original-source": "summary", "entity": "mention", "concept": "mention",
                "comparison": "claim"}


class Verdict(Enum):
    APPROVE = "a"
    EDIT = "e"
    REJECT = "r"
    SKIP = "s"


@dataclass
class Draft:
    plan_id: int
    page_key: str
    title: str
    page_type: str
    action: str
    status: str
    sources: list[str]
    new_sources: list[str]
    removed_sources: list[str]
    model: str | None
    summary: str | None
    draft: str | None
    error: str | None
    created_at: str

    def to_dict(self, *, text: bool = False) -> dict:
        out = asdict(self)
        if not text:
            out.pop("draft")
        return out


class Reviewer(Protocol):
    """Decides one draft. `reason` is asked for on REJECT, `edit` on EDIT (the new body)."""

    def judge(self, draft: Draft) -> Verdict: ...

    def reason(self, draft: Draft) -> str: ...

    def edit(self, draft: Draft) -> str: ...


@dataclass
class ApproveReport:
    approved: list[dict] = field(default_factory=list)  # {plan_id, page_id, page_key, title, version, action}
    noop: list[dict] = field(default_factory=list)  # drafts equal to the current page
    stale: list[dict] = field(default_factory=list)  # {plan_id, page_key, replanned: [plan ids]}
    failed: list[dict] = field(default_factory=list)  # {plan_id, error}
    linked: list[int] = field(default_factory=list)  # older pages that gained links to the new ones
    vectors: dict = field(default_factory=dict)  # what vectors.sync_pages reported, or why it was skipped

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RejectReport:
    rejected: list[dict] = field(default_factory=list)  # {plan_id, page_key, title, reason}
    failed: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReviewSummary:
    approve: ApproveReport = field(default_factory=ApproveReport)
    reject: RejectReport = field(default_factory=RejectReport)
    skipped: list[int] = field(default_factory=list)


# --- reading -----------------------------------------------------------------------------------

def _draft(plan: dict) -> Draft:
    inputs = plan["inputs"]
    return Draft(plan_id=plan["plan_id"], page_key=plan["page_key"], title=plan["title"], page_type=plan["page_type"],
                 action=plan["action"], status=plan["status"], sources=list(inputs.get("sources", [])),
                 new_sources=list(inputs.get("new_sources", [])),
                 removed_sources=list(inputs.get("removed_sources", [])), model=plan["model"],
                 summary=plan["summary"], draft=plan["draft"], error=plan["error"], created_at=plan["created_at"])


def list_drafts(conn: sqlite3.Connection, include: Iterable[str] = OUTBOX) -> list[Draft]:
    """Plans with the given statuses (default: drafts waiting for review), oldest first."""
    statuses = tuple(include)
    if not statuses:
        return []
    marks = ",".join("?" * len(statuses))
    rows = conn.execute(f"SELECT plan_id FROM page_plans WHERE status IN ({marks}) ORDER BY plan_id", statuses)
    return [_draft(planner.get_plan(conn, r[0])) for r in rows.fetchall()]


def _require_plan(conn: sqlite3.Connection, plan_id: int) -> dict:
    plan = planner.get_plan(conn, int(plan_id))
    if plan is None:
        raise NotFoundError(f"No plan {plan_id}", hint="list drafts with `kompl drafts --all`")
    return plan


def page_write_for(conn: sqlite3.Connection, plan: dict) -> wiki.PageWrite:
    """The PageWrite that approving `plan` commits (docs/compile.md)."""
    if plan["draft"] is None:
        raise KomplError(f"Plan {plan['plan_id']} ({plan['title']}) has no draft yet",
                         hint="draft it with `kompl compile`, then review it")
    inputs = plan["inputs"]
    removed = set(inputs.get("removed_sources", []))
    page = wiki.get_by_key(conn, plan["page_key"])
    contributions: dict[str, str] = {}
    if page is not None:  # an update keeps how the page's earlier sources contributed
        for sid, how in conn.execute("SELECT source_id, contribution FROM page_sources WHERE page_id = ?",
                                     (page["page_id"],)):
            if sid not in removed:
                contributions[sid] = how
    how = CONTRIBUTION.get(plan["page_type"], "cited")
    for sid in inputs.get("sources", []):
        if sid not in removed:
            contributions.setdefault(sid, how)
    for sid in inputs.get("new_sources", []):
        if sid not in removed:
            contributions[sid] = how
    return wiki.PageWrite(
        page_key=plan["page_key"], page_type=plan["page_type"], title=plan["title"], body=plan["draft"],
        sources=sorted(contributions.items()), author=plan["model"] or "unknown", category=plan["category"],
        summary=plan["summary"] or "", aliases=tuple(inputs.get("aliases", [])), plan_id=plan["plan_id"],
        reason=f"plan {plan['plan_id']}: {plan['action']}",
    )


def diff(conn: sqlite3.Connection, plan_id: int) -> str:
    """Unified diff of the current page text against the page the draft would produce."""
    plan = _require_plan(conn, plan_id)
    write = page_write_for(conn, plan)
    targets = wiki.link_targets(conn)
    for alias in write.aliases:
        targets.setdefault(alias, write.title)
    after = wiki.render(write, updated=db.utcnow(), targets=targets)
    page = wiki.get_by_key(conn, plan["page_key"])
    before = wiki.content(conn, page["page_id"]) if page else ""
    old = f"a/{page['slug']}.md (version {page['version']})" if page else "/dev/null"
    return _unified(before, after, old, f"b/{plan['page_key']} (plan {plan['plan_id']})")


def page_diff(conn: sqlite3.Connection, page: str | int, from_version: int | None = None,
              to_version: int | None = None) -> str:
    """Unified diff between two versions of a page (default: the previous and the current one)."""
    row = wiki.get(conn, page)
    to_version = row["version"] if to_version is None else to_version
    from_version = max(0, to_version - 1) if from_version is None else from_version
    before = wiki.content(conn, row["page_id"], from_version) if from_version else ""
    after = wiki.content(conn, row["page_id"], to_version)
    return _unified(before, after, f"a/{row['slug']}.md (version {from_version})",
                    f"b/{row['slug']}.md (version {to_version})")


def _unified(before: str, after: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=old, tofile=new))


# --- deciding ----------------------------------------------------------------------------------

def _ids(conn: sqlite3.Connection, plan_ids: Sequence[int] | str) -> list[int]:
    if plan_ids == ALL:
        return [d.plan_id for d in list_drafts(conn)]
    return list(dict.fromkeys(int(p) for p in plan_ids))


def _is_stale(plan: dict, page: dict | None) -> bool:
    if plan["action"] == "create":
        return page is not None and page["status"] == "active"
    return page is None or page["version"] != plan["base_version"]


def _committed_by(conn: sqlite3.Connection, plan: dict, page: dict | None) -> bool:
    """The draft's version is already in the store (a crash after the commit, before the plan was marked)."""
    return page is not None and any(v["plan_id"] == plan["plan_id"] for v in wiki.history(conn, page["page_id"]))


def _decide(conn: sqlite3.Connection, plan: dict, status: str, action: str, details: dict, reason: str | None = None) -> None:
    now = db.utcnow()
    with db.transaction(conn, action, target=plan["page_key"], details={"plan_id": plan["plan_id"], **details}):
        conn.execute("UPDATE page_plans SET status=?, decided_reason=?, decided_at=?, updated_at=? WHERE plan_id=?",
                     (status, reason, now, now, plan["plan_id"]))


def approve(ws: Workspace, conn: sqlite3.Connection, plan_ids: Sequence[int] | str) -> ApproveReport:
    """Commit drafts (`plan_ids`, or ALL drafts). Stale drafts are re-planned; failures are collected."""
    report = ApproveReport()
    touched: list[int] = []
    created: list[int] = []
    for plan_id in _ids(conn, plan_ids):
        try:
            _approve_one(ws, conn, plan_id, report, touched, created)
        except Exception as exc:  # noqa: BLE001 - one bad plan must not stop the others; the error is reported
            report.failed.append({"plan_id": plan_id, "error": str(exc)})
    if created:
        # One link pass for the whole batch: every page (the new ones included) gains
        # links to the new pages, as one new version per page that changed.
        linked = wiki.link_pass(ws, conn, created)
        report.linked.extend(pid for pid in linked if pid not in report.linked)
        touched.extend(linked)
    if touched:
        report.vectors = _sync_vectors(ws, conn, sorted(set(touched)))
    if plan_ids == ALL and not report.vectors.get("deferred"):
        # `approve --all` also catches the vectors up: a run killed after its commits but before its
        # vector sync leaves those pages to no re-run (their plans are already approved).
        caught_up = _sync_vectors(ws, conn, None)
        if caught_up.get("embedded_pages") or caught_up.get("deleted_pages"):
            report.vectors = {**report.vectors, "caught_up": caught_up}
    return report


def _approve_one(ws: Workspace, conn: sqlite3.Connection, plan_id: int, report: ApproveReport,
                 touched: list[int], created: list[int]) -> None:
    plan = _require_plan(conn, plan_id)
    if plan["status"] != "drafted":
        raise KomplError(f"Plan {plan_id} is {plan['status']}, not a draft waiting for review",
                         hint="see `kompl drafts --all`")
    page = wiki.get_by_key(conn, plan["page_key"])
    if _committed_by(conn, plan, page):
        _decide(conn, plan, "approved", "approve", {"version": page["version"], "recovered": True})
        report.approved.append(_entry(plan, page))
        # The crashed run never got to its link pass and vectors: this run does them.
        touched.append(page["page_id"])
        if plan["action"] == "create":
            created.append(page["page_id"])
        return
    if _is_stale(plan, page):
        why = (f"stale: the page is at version {page['version'] if page else None}, "
               f"the draft started from {plan['base_version']}")
        with db.transaction(conn, "approve", target=plan["page_key"],
                            details={"plan_id": plan_id, "stale": True}):
            # The planner closes the stale plan itself (keeping any removal it carried) and plans afresh.
            replanned = planner.plan_pending(ws, conn, page_keys=[plan["page_key"]])
            planner.supersede(conn, plan_id, why)
        report.stale.append({"plan_id": plan_id, "page_key": plan["page_key"], "reason": why,
                             "replanned": [c["plan_id"] for c in replanned.created]})
        return
    write = page_write_for(conn, plan)
    row, changed = wiki.commit_version(ws, conn, write)
    faults.point("approve.after_page_commit")
    if not changed:
        _decide(conn, plan, "noop", "approve", {"noop": True}, "the draft equals the current page")
        report.noop.append(_entry(plan, row))
        return
    _decide(conn, plan, "approved", "approve", {"version": row["version"], "page_id": row["page_id"]})
    report.approved.append(_entry(plan, row))
    touched.append(row["page_id"])
    if page is None:
        created.append(row["page_id"])


def _entry(plan: dict, page: dict) -> dict:
    return {"plan_id": plan["plan_id"], "page_id": page["page_id"], "page_key": plan["page_key"],
            "title": plan["title"], "page_type": plan["page_type"], "action": plan["action"],
            "version": page["version"]}


def _sync_vectors(ws: Workspace, conn: sqlite3.Connection, page_ids: list[int] | None) -> dict:
    """Upsert the vectors of `page_ids`; None: reconcile the whole index (embeds only what is missing)."""
    import importlib

    try:
        vectors = importlib.import_module("kompl.vectors")
    except ImportError:
        return {"skipped": "kompl.vectors is not installed; vectors are brought up to date by its reconcile step"}
    try:
        if page_ids is None:
            if not hasattr(vectors, "reconcile"):
                return {}
            found = vectors.reconcile(ws, conn)
            return {k: v for k, v in found.items() if k in ("embedded_pages", "embedded_chunks", "deleted_pages",
                                                             "deferred", "fixed")}
        return dict(vectors.sync_pages(ws, conn, page_ids) or {})
    except Exception as exc:  # noqa: BLE001 - the pages are committed; the vector index is a projection, repaired later
        return {"error": str(exc), "deferred": page_ids}


def reject(conn: sqlite3.Connection, plan_ids: Sequence[int], reason: str) -> RejectReport:
    """Reject open plans: the same (page, inputs) is never proposed again (a tombstone)."""
    report = RejectReport()
    for plan_id in _ids(conn, plan_ids):
        try:
            plan = _require_plan(conn, plan_id)
            if plan["status"] not in planner.OPEN_STATUSES:
                raise KomplError(f"Plan {plan_id} is already {plan['status']}", hint="see `kompl drafts --all`")
            now = db.utcnow()
            with db.transaction(conn, "reject", target=plan["page_key"], details={"plan_id": plan_id, "reason": reason}):
                conn.execute("UPDATE page_plans SET status='rejected', decided_reason=?, decided_at=?, updated_at=?"
                             " WHERE plan_id=?", (reason, now, now, plan_id))
                planner.add_tombstone(conn, plan["page_key"], plan["inputs_hash"], reason, plan_id)
            report.rejected.append({"plan_id": plan_id, "page_key": plan["page_key"], "title": plan["title"],
                                    "reason": reason})
        except Exception as exc:  # noqa: BLE001 - reported per plan, the others go on
            report.failed.append({"plan_id": plan_id, "error": str(exc)})
    return report


def approve_all_if_auto(ws: Workspace, conn: sqlite3.Connection) -> ApproveReport | None:
    """With `auto_approve` on, commit every waiting draft (compile calls this); otherwise None."""
    if not ws.settings.auto_approve:
        return None
    return approve(ws, conn, ALL)


def review_outbox(ws: Workspace, conn: sqlite3.Connection, reviewer: Reviewer) -> ReviewSummary:
    """Put every waiting draft to `reviewer` and carry out its verdicts."""
    summary = ReviewSummary()
    for draft in list_drafts(conn):
        verdict = reviewer.judge(draft)
        if verdict is Verdict.EDIT:
            body = reviewer.edit(draft)
            with db.transaction(conn, "edit_draft", target=draft.page_key, details={"plan_id": draft.plan_id}):
                conn.execute("UPDATE page_plans SET draft=?, model=?, updated_at=? WHERE plan_id=?",
                             (body, wiki.HUMAN, db.utcnow(), draft.plan_id))
            verdict = Verdict.APPROVE
        if verdict is Verdict.APPROVE:
            one = approve(ws, conn, [draft.plan_id])
            for name in ("approved", "noop", "stale", "failed", "linked"):
                getattr(summary.approve, name).extend(getattr(one, name))
            summary.approve.vectors.update(one.vectors)
        elif verdict is Verdict.REJECT:
            one = reject(conn, [draft.plan_id], reviewer.reason(draft))
            summary.reject.rejected.extend(one.rejected)
            summary.reject.failed.extend(one.failed)
        else:
            summary.skipped.append(draft.plan_id)
    return summary
