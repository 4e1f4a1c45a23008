"""Drafting: open page plans become page drafts in the pending outbox.

For every plan with status 'planned' or 'failed' this stage builds the prompt
inputs, in this order: the workspace's schema.md, the existing page (updates),
a dossier (the entity's context sentences under all its aliases, claims with
their verbatim quotes, relationships, contradictions from `conflicts`, concept
descriptions; member pages for overviews) and the relevant source passages. An
update sends the existing page plus only what its `new_sources` add, so its
prompt stays the same size however many sources the page already has; nothing
from `removed_sources` is ever read into a prompt (their citations and the
statements they support are taken out of the existing page first).

Each model has an input budget (`input_budget`). A prompt over it is
map-reduced: dossier overflow and passages are packed into groups, each group
condensed by a `summarize` call (repeated while still too big), and the page is
drafted from the summaries. What went in only as a summary, or not at all, is
recorded in the plan's `left_out`; nothing is cut silently.

Drafts of a batch run concurrently through `Gateway.run_many`. Each plan's
result is written in its own short transaction with a `draft` audit row, never
across a model call. A failed plan gets status 'failed' (retried next run); a
draft equal to the current page becomes 'noop'; an 'original-source' plan is
the source's own markdown, with no model call. This module owns the draft
columns of `page_plans` (draft, summary, model, llm_call_id, left_out, error,
attempts, status). The prompt inputs are gathered in `dossier.py`, and the
citation and page-body text rules are in `citations.py`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, field_validator

from kompl import db, faults
from kompl.pipeline.citations import (  # noqa: F401 - re-exported (kompl.offline.draft, kompl.maintain, tests)
    CITATION,
    body_key,
    citation_ids,
    cite,
    clean_body,
    first_sentence,
    remove_cited,
    split_sentences,
    strip_links,
)
from kompl.pipeline.dossier import (  # noqa: F401 - re-exported
    NEW_PAGE,
    PASSAGE_CHARS,
    _existing_body,
    _Job,
    _Sources,
    build_job,
    read_schema,
)
from kompl.text import approx_tokens
from kompl.pipeline import StageResult
from kompl.workspace import Workspace

DRAFT_VERSION = "1"
PROMPT = "draft"
SUMMARIZE_PROMPT = "summarize"
ORIGINAL_MODEL = "kompl/original-source"
OFFLINE_INPUT_TOKENS = 12_000  # prompt tokens per drafting call for the offline model
MODEL_INPUT_TOKENS = 24_000  # default for real models (setting `draft_input_tokens` overrides both)
DRAFT_OUTPUT_TOKENS = 4_096
SUMMARY_OUTPUT_TOKENS = 1_024
MAX_REDUCE_ROUNDS = 3
DOSSIER_SHARE = 0.6  # of the room left after schema + existing page, when passages compete for it
BATCH_PLANS = 32  # plans drafted per gateway batch (results written after each batch)
OPEN_STATUSES = ("planned", "failed")

ProgressFn = Callable[[str, dict], None]


# --- the model contract --------------------------------------------------------------------

class DraftResult(BaseModel):
    """What a `draft` call returns: the page body (markdown, no frontmatter, no wikilinks)."""

    title: str = ""
    summary: str = ""
    body: str
    category: str = ""
    model: str = ""  # who wrote it (the offline model names itself)

    @field_validator("title", "summary", "category", "model", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value


class SummaryResult(BaseModel):
    """What a `summarize` call returns: condensed passages, citations kept."""

    summary: str
    model: str = ""


# --- report --------------------------------------------------------------------------------

@dataclass
class DraftReport(StageResult):
    model: str = ""
    drafted: list[dict] = field(default_factory=list)
    noop: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    model_calls: int = 0
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --- budget --------------------------------------------------------------------------------

def input_budget(ws: Workspace, model: str, override: int | None = None) -> int:
    """Prompt tokens one drafting call may use: `override`, the `draft_input_tokens`
    setting, or a default per model (the offline model gets OFFLINE_INPUT_TOKENS)."""
    if override:
        return int(override)
    configured = ws.settings.draft_input_tokens
    if configured:
        return int(configured)
    from kompl.llm import OFFLINE_MODEL

    return OFFLINE_INPUT_TOKENS if model == OFFLINE_MODEL else MODEL_INPUT_TOKENS


def prompt_tokens(prompt: str, variables: dict, schema: type[BaseModel]) -> int:
    """Tokens of the rendered prompt as the gateway sends it (system, JSON instruction, user)."""
    from kompl import prompts

    system, user, _ = prompts.render(prompt, variables)
    return approx_tokens(system + user) + _instruction_tokens(schema)


_INSTRUCTION_TOKENS: dict[str, int] = {}


def _instruction_tokens(schema: type[BaseModel]) -> int:
    from kompl import prompts

    if schema.__name__ not in _INSTRUCTION_TOKENS:
        _INSTRUCTION_TOKENS[schema.__name__] = approx_tokens(
            "\n\n" + prompts.json_instruction(schema.model_json_schema()))
    return _INSTRUCTION_TOKENS[schema.__name__]


# --- reading what a plan needs --------------------------------------------------------------

def open_plans(conn: sqlite3.Connection, plan_ids: list[int] | None = None) -> tuple[list[dict], list[dict]]:
    """(plans to draft, skipped [{plan_id, reason}]): status 'planned' or 'failed', oldest first."""
    marks = ",".join("?" * len(OPEN_STATUSES))
    rows = conn.execute(f"SELECT * FROM page_plans WHERE status IN ({marks}) ORDER BY plan_id", OPEN_STATUSES).fetchall()
    plans = [_plan(r) for r in rows]
    skipped: list[dict] = []
    if plan_ids:
        wanted = {int(p) for p in plan_ids}
        plans = [p for p in plans if p["plan_id"] in wanted]
        found = {p["plan_id"] for p in plans}
        for pid in sorted(wanted - found):
            row = conn.execute("SELECT status FROM page_plans WHERE plan_id = ?", (pid,)).fetchone()
            skipped.append({"plan_id": pid, "reason": "no such plan" if row is None else f"status {row[0]} (not open)"})
    return plans, skipped


def _plan(row: sqlite3.Row) -> dict:
    plan = dict(row)
    try:
        plan["inputs"] = json.loads(plan.get("inputs") or "{}")
    except json.JSONDecodeError:
        plan["inputs"] = {}
    return plan


# --- fitting the budget (map-reduce) --------------------------------------------------------

_DOSSIER_OVERFLOW = ("contexts", "relationships", "claims", "descriptions")  # moved to passages in this order


def _measure(job: _Job) -> int:
    return prompt_tokens(PROMPT, job.variables | {"passages": job.passages}, DraftResult)


def _fit_dossier(job: _Job, budget: int) -> None:
    """Move dossier items that crowd out everything else into the passages (to be summarised)."""
    dossier = job.variables["dossier"]
    fixed = prompt_tokens(PROMPT, job.variables | {"dossier": {}, "passages": []}, DraftResult)
    allowance = max(500, int((budget - fixed) * DOSSIER_SHARE))
    size = approx_tokens(json.dumps(dossier, ensure_ascii=False))
    if size <= allowance or _measure(job) <= budget:
        return
    moved: dict[str, int] = {}
    for name in _DOSSIER_OVERFLOW:
        items = dossier.get(name)
        while isinstance(items, list) and items and size > allowance:
            item = items.pop()
            size -= approx_tokens(json.dumps(item, ensure_ascii=False)) + 1
            job.passages.insert(0, {"source": item.get("source", ""), "text": _item_text(name, item)})
            moved[name] = moved.get(name, 0) + 1
    if moved:
        what = ", ".join(f"{n} {name}" for name, n in moved.items())
        job.left_out.append({"what": f"{what} from the dossier (as structured data)",
                             "why": f"the dossier passed {DOSSIER_SHARE:.0%} of the {budget}-token input budget:"
                                    " they were summarised with the passages instead"})


def _item_text(name: str, item: dict) -> str:
    if name == "claims":
        return f"{item['claim']} (quote: \"{item['quote']}\")" if item.get("quote") else item["claim"]
    if name == "relationships":
        return f"{item['from']} {item['type'].replace('_', ' ')} {item['to']}: {item.get('description', '')}".strip()
    if name == "contexts":
        return item["sentence"]
    return f"{item.get('name', '')}: {item.get('description', '')}"


def _groups(passages: list[dict], group_tokens: int) -> list[list[dict]]:
    """Pack passages into groups of at most `group_tokens`, splitting a passage that alone is bigger."""
    pieces: list[dict] = []
    for p in passages:
        if approx_tokens(p["text"]) <= group_tokens:
            pieces.append(p)
            continue
        chunk = ""
        for sentence in split_sentences(p["text"]) or [p["text"]]:
            while approx_tokens(sentence) > group_tokens:  # one enormous "sentence": cut by characters
                room = group_tokens * 4
                pieces.append(p | {"text": sentence[:room]})
                sentence = sentence[room:]
            if chunk and approx_tokens(chunk + " " + sentence) > group_tokens:
                pieces.append(p | {"text": chunk})
                chunk = ""
            chunk = f"{chunk} {sentence}".strip()
        if chunk:
            pieces.append(p | {"text": chunk})
    groups: list[list[dict]] = []
    size = 0
    for piece in pieces:
        tokens = approx_tokens(json.dumps(piece, ensure_ascii=False))
        if groups and size + tokens <= group_tokens:
            groups[-1].append(piece)
            size += tokens
        else:
            groups.append([piece])
            size = tokens
    return groups


def _summarize_tasks(job: _Job, budget: int, model: str) -> list:
    from kompl.llm import Task

    subject = {"title": job.plan["title"], "page_type": job.plan["page_type"]}
    overhead = prompt_tokens(SUMMARIZE_PROMPT, {"subject": subject, "passages": [], "target_words": 0}, SummaryResult)
    group_tokens = max(300, budget - overhead - 100)
    job.groups = _groups(job.passages, group_tokens)
    room = max(200, budget - prompt_tokens(PROMPT, job.variables | {"passages": []}, DraftResult) - 100)
    words = max(40, min(400, int(room * 0.7 / max(1, len(job.groups)))))
    if job.rounds == 0:
        sources = sorted({p["source"] for p in job.passages if p.get("source")})
        tokens = sum(approx_tokens(p["text"]) for p in job.passages)
        job.left_out.append({
            "what": f"the verbatim text of {len(job.passages)} passage(s), about {tokens} tokens, from "
                    f"{', '.join(sources) or 'the dossier'}",
            "why": f"over the {budget}-token input budget of {model}: condensed by summarize calls (map-reduce)"
                   " and the page drafted from the summaries",
        })
    return [Task(purpose="summarize", prompt=SUMMARIZE_PROMPT,
                 variables={"subject": subject, "passages": group, "target_words": words},
                 schema=SummaryResult, max_output_tokens=SUMMARY_OUTPUT_TOKENS,
                 meta={"plan_id": job.plan["plan_id"], "page_key": job.key, "round": job.rounds + 1, "group": i + 1})
            for i, group in enumerate(job.groups)]


def _trim(job: _Job, budget: int) -> None:
    """Last resort after MAX_REDUCE_ROUNDS: leave out trailing summaries, recorded."""
    dropped = []
    while job.passages and _measure(job) > budget:
        dropped.append(job.passages.pop())
    if dropped:
        sources = sorted({s for p in dropped for s in re.findall(r"src-[0-9A-Za-z]+", p["text"] + " " + p.get("source", ""))})
        job.left_out.append({
            "what": f"{len(dropped)} summary passage(s) covering {', '.join(sources) or 'the sources'}",
            "why": f"still over the {budget}-token input budget after {MAX_REDUCE_ROUNDS} summarize rounds",
        })


def _reduce(gw: Any, jobs: list[_Job], budget: int, model: str, report: DraftReport) -> None:
    """Map-reduce every job whose prompt is over budget, all jobs' groups in one batch per round."""
    for job in jobs:
        _fit_dossier(job, budget)
    while True:
        todo = [j for j in jobs if j.error is None and j.passages and _measure(j) > budget]
        over = [j for j in todo if j.rounds >= MAX_REDUCE_ROUNDS]
        for job in over:
            _trim(job, budget)
        todo = [j for j in todo if j.rounds < MAX_REDUCE_ROUNDS]
        if not todo:
            break
        tasks, owners = [], []
        for job in todo:
            job_tasks = _summarize_tasks(job, budget, model)
            tasks += job_tasks
            owners += [job] * len(job_tasks)
        report.model_calls += len(tasks)
        results = gw.run_many(tasks)
        summaries: dict[int, list[dict]] = {}
        for job, task, result in zip(owners, tasks, results):
            if isinstance(result, Exception):
                job.error = job.error or f"summarize failed: {result}"
                continue
            group = task.variables["passages"]
            sources = sorted({p.get("source") for p in group if p.get("source")})
            text = result.summary.strip()
            if not CITATION.search(text) and len(sources) == 1:
                text = " ".join(cite(s, sources) for s in split_sentences(text))
            summaries.setdefault(id(job), []).append({"source": ", ".join(sources), "kind": "summary", "text": text})
            job.summarize_calls += 1
            if task.call_id is not None:
                job.summarize_ids.append(task.call_id)
        for job in todo:
            if job.error is None:
                job.passages = summaries.get(id(job), [])
                job.rounds += 1
    for job in jobs:
        note = next((n for n in job.left_out if "map-reduce" in n["why"]), None)
        if job.error is None and job.rounds and note is not None:
            note["why"] += f" ({job.summarize_calls} summarize call(s) in {job.rounds} round(s))"


# --- the stage -----------------------------------------------------------------------------

def draft_pending(
    ws: Workspace, conn: sqlite3.Connection, *, gateway: Any = None, model: str | None = None,
    plan_ids: list[int] | None = None, on_progress: ProgressFn | None = None, budget_tokens: int | None = None,
) -> DraftReport:
    """Draft every plan with status 'planned' or 'failed' (or just `plan_ids`).

    `gateway` replaces the default `Gateway(ws, conn, model=model)`;
    `budget_tokens` overrides the per-model input budget (`input_budget`).
    Progress events: ("start", {total}), ("plan", {plan_id, title, page_type, status}).
    """
    from kompl.llm import Gateway

    started = time.perf_counter()
    plans, skipped = open_plans(conn, plan_ids)
    report = DraftReport(skipped=skipped)
    emit = on_progress or (lambda event, info: None)
    emit("start", {"total": len(plans)})
    if not plans:
        report.model = getattr(gateway, "model", None) or model or ws.settings.model
        report.seconds = time.perf_counter() - started
        return report
    gw = gateway or Gateway(ws, conn, model=model)
    model_name = getattr(gw, "model", None) or model or ws.settings.model
    report.model = model_name
    budget = input_budget(ws, model_name, budget_tokens)
    schema_text = read_schema(ws)
    srcs = _Sources(ws, conn)
    for i in range(0, len(plans), BATCH_PLANS):
        _draft_batch(ws, conn, gw, plans[i:i + BATCH_PLANS], schema_text, srcs, budget, model_name, report, emit)
    report.seconds = time.perf_counter() - started
    return report


def _draft_batch(ws, conn, gw, plans, schema_text, srcs, budget, model_name, report, emit) -> None:
    from kompl.llm import Task

    jobs: list[_Job] = []
    for plan in plans:
        if plan["page_type"] == "original-source":
            _original_source(conn, plan, srcs, report, emit)
            continue
        try:
            jobs.append(build_job(ws, conn, plan, schema_text, srcs))
        except (OSError, ValueError, KeyError) as exc:  # a missing raw file, a broken plan row
            _fail(conn, plan, f"could not gather the inputs: {exc.__class__.__name__}: {exc}", [], report, emit)
    _reduce(gw, jobs, budget, model_name, report)
    ready = [j for j in jobs if j.error is None]
    tasks = [Task(purpose="draft", prompt=PROMPT, variables=j.variables | {"passages": j.passages}, schema=DraftResult,
                  max_output_tokens=DRAFT_OUTPUT_TOKENS,
                  meta={"plan_id": j.plan["plan_id"], "page_key": j.key, "summarize_calls": j.summarize_calls})
             for j in ready]
    report.model_calls += len(tasks)
    results = gw.run_many(tasks) if tasks else []
    for job in jobs:
        if job.error is not None:
            _fail(conn, job.plan, job.error, job.left_out, report, emit)
    offline = model_name.startswith("kompl/offline")
    for job, task, result in zip(ready, tasks, results):
        if isinstance(result, Exception):
            _fail(conn, job.plan, str(result), job.left_out, report, emit)
            continue
        body, notes = clean_body(result.body, set(job.allowed), job.removed)
        if not body.strip():
            _fail(conn, job.plan, "the model returned an empty page body", job.left_out + notes, report, emit)
            continue
        summary = _clean_summary(result.summary) or first_sentence(body)
        written_by = result.model if offline and result.model.startswith("kompl/offline") else model_name
        _store(conn, job.plan, body=body, summary=summary, model=written_by, call_id=task.call_id,
               left_out=job.left_out + notes, existing=job.existing, report=report, emit=emit,
               extra={"summarize_calls": job.summarize_calls, "summarize_call_ids": job.summarize_ids})


def _clean_summary(text: str) -> str:
    text = CITATION.sub("", strip_links(text or ""))
    text = re.sub(r"\s+", " ", text).replace(" .", ".").strip()
    return first_sentence(text, 300) if text else ""


def _original_source(conn, plan: dict, srcs: _Sources, report: DraftReport, emit) -> None:
    """An 'original-source' page is the source's own markdown: no model call."""
    inputs = plan["inputs"]
    removed = set(inputs.get("removed_sources") or [])
    sources = [s for s in inputs.get("sources") or [] if s not in removed]
    if not sources and plan["page_key"].startswith("source:"):
        candidate = plan["page_key"].split(":", 1)[1]
        sources = [candidate] if candidate not in removed else []
    if not sources:
        _fail(conn, plan, "an original-source plan names no active source", [], report, emit)
        return
    try:
        body = srcs.text(sources[0]).strip() + "\n"
    except OSError as exc:
        _fail(conn, plan, f"could not read the source's markdown: {exc}", [], report, emit)
        return
    existing = _existing_body(conn, plan)
    _store(conn, plan, body=body, summary=first_sentence(body), model=ORIGINAL_MODEL, call_id=None,
           left_out=[], existing=existing, report=report, emit=emit, extra={})


def _store(conn, plan: dict, *, body: str, summary: str, model: str, call_id: int | None, left_out: list[dict],
           existing: str | None, report: DraftReport, emit, extra: dict) -> None:
    """Write one plan's draft in its own short transaction, with its audit row."""
    noop = existing is not None and body_key(body) == body_key(existing)
    status = "noop" if noop else "drafted"
    now = db.utcnow()
    details = {"plan_id": plan["plan_id"], "status": status, "model": model, "llm_call_id": call_id,
               "left_out": len(left_out), "draft_version": DRAFT_VERSION, **extra}
    with db.transaction(conn):
        row = conn.execute("SELECT status FROM page_plans WHERE plan_id = ?", (plan["plan_id"],)).fetchone()
        if row is None or row[0] not in OPEN_STATUSES:
            report.skipped.append({"plan_id": plan["plan_id"], "reason": "changed while drafting"
                                   + (f" (now {row[0]})" if row else " (deleted)")})
            return
        conn.execute(
            "UPDATE page_plans SET status = ?, draft = ?, summary = ?, model = ?, llm_call_id = ?, left_out = ?,"
            " error = NULL, attempts = attempts + 1, updated_at = ?, decided_at = ?, decided_reason = ?"
            " WHERE plan_id = ?",
            (status, body, summary, model, call_id, json.dumps(left_out, ensure_ascii=False), now,
             now if noop else None, "the draft equals the current page" if noop else None, plan["plan_id"]))
        db.log_activity(conn, "draft", target=plan["page_key"], details=details, actor=model)
    faults.point("draft.after_store")
    entry = {"plan_id": plan["plan_id"], "page_key": plan["page_key"], "title": plan["title"],
             "page_type": plan["page_type"], "action": plan["action"], "model": model, "llm_call_id": call_id,
             "left_out": left_out, "chars": len(body)}
    (report.noop if noop else report.drafted).append(entry)
    emit("plan", {"plan_id": plan["plan_id"], "title": plan["title"], "page_type": plan["page_type"], "status": status})


def _fail(conn, plan: dict, error: str, left_out: list[dict], report: DraftReport, emit) -> None:
    now = db.utcnow()
    with db.transaction(conn):
        row = conn.execute("SELECT status FROM page_plans WHERE plan_id = ?", (plan["plan_id"],)).fetchone()
        if row is None or row[0] not in OPEN_STATUSES:
            report.skipped.append({"plan_id": plan["plan_id"], "reason": "changed while drafting"})
            return
        conn.execute("UPDATE page_plans SET status = 'failed', error = ?, attempts = attempts + 1, left_out = ?,"
                     " updated_at = ? WHERE plan_id = ?",
                     (error[:2000], json.dumps(left_out, ensure_ascii=False), now, plan["plan_id"]))
        db.log_activity(conn, "draft", target=plan["page_key"],
                        details={"plan_id": plan["plan_id"], "status": "failed", "error": error[:500]}, actor="kompl")
    report.failed.append({"plan_id": plan["plan_id"], "page_key": plan["page_key"], "title": plan["title"],
                          "error": error, "attempts": plan.get("attempts", 0) + 1})
    emit("plan", {"plan_id": plan["plan_id"], "title": plan["title"], "page_type": plan["page_type"], "status": "failed"})


__all__ = [
    "DRAFT_VERSION", "DraftReport", "DraftResult", "SummaryResult", "body_key", "build_job", "cite",
    "clean_body", "draft_pending", "first_sentence", "input_budget", "open_plans", "prompt_tokens",
    "read_schema", "remove_cited", "split_sentences", "strip_links",
]
