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
attempts, status).
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

from kompl import db
from kompl.text import approx_tokens, norm_name
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
PASSAGE_CHARS = 1_500  # a longer paragraph is cut down to its sentences that mention the subject
BATCH_PLANS = 32  # plans drafted per gateway batch (results written after each batch)
OPEN_STATUSES = ("planned", "failed")
NEW_PAGE = "(none: this is a new page)"

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
class DraftReport:
    model: str = ""
    drafted: list[dict] = field(default_factory=list)
    noop: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    model_calls: int = 0
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {
            "model": self.model, "drafted": self.drafted, "noop": self.noop, "failed": self.failed,
            "skipped": self.skipped, "model_calls": self.model_calls, "notices": self.notices,
            "seconds": round(self.seconds, 3),
        }


# --- text helpers (shared with the offline model) -----------------------------------------

CITATION = re.compile(r"\[\s*(src-[0-9A-Za-z]+(?:\s*[,;]\s*src-[0-9A-Za-z]+)*)\s*\]")
_WIKILINK = re.compile(r"\[\[([^\]|\n]+)(?:\|([^\]\n]+))?\]\]")
_SENTENCE_END = re.compile(
    r"[.!?…][\"'”’)]*(?:\s*\[\s*src-[0-9A-Za-z]+(?:\s*[,;]\s*src-[0-9A-Za-z]+)*\s*\][.!?]?)?\s+(?=[A-Z0-9\"“‘(\[*_])"
)
_SPACES = re.compile(r"[ \t]+")


def citation_ids(group: str) -> list[str]:
    """The ids inside one citation group's brackets."""
    return [p.strip() for p in re.split(r"[,;]", group) if p.strip()]


def cite(sentence: str, ids: list[str] | tuple[str, ...] | str) -> str:
    """`sentence` with a citation before its final full stop (after a closing quote)."""
    ids = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
    text = sentence.strip()
    if not ids:
        return text
    group = f"[{', '.join(ids)}]"
    match = re.match(r"^(.*?)([.!?…]*)$", text, re.S)
    body, stop = match.group(1), match.group(2)
    if not stop:  # ends in a closing quote or bracket ("... “yes.”"), or without punctuation
        return f"{text} {group}" if body.endswith(("\"", "”", "’", "'", ")")) else f"{text} {group}."
    return f"{body} {group}{stop}"


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph (a simple splitter that keeps a trailing citation with its sentence)."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    out, pos = [], 0
    for match in _SENTENCE_END.finditer(text):
        out.append(text[pos:match.end()].strip())
        pos = match.end()
    out.append(text[pos:].strip())
    return [s for s in out if s]


def strip_links(text: str) -> str:
    """`[[Title]]` -> Title, `[[Title|shown]]` -> shown."""
    return _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)


def strip_frontmatter(text: str) -> str:
    from kompl.wiki.markdown import split_frontmatter

    return split_frontmatter(text)[1] if text.startswith("---\n") else text


def body_key(text: str) -> str:
    """What two bodies must share to count as the same page (links and spacing ignored)."""
    return re.sub(r"\s+", " ", strip_links(strip_frontmatter(text or ""))).strip()


def first_sentence(text: str, max_chars: int = 300) -> str:
    """The first sentence of the first prose line (no headings, citations, links or markup)."""
    for line in strip_frontmatter(text).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "|", "```", "---", ">")) or re.fullmatch(r"[-*_=\s]+", line):
            continue
        line = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line)
        line = CITATION.sub("", strip_links(line))
        line = re.sub(r"[*_`]+", "", line)
        line = _SPACES.sub(" ", line).replace(" .", ".").replace(" ,", ",").strip()
        sentences = split_sentences(line)
        if sentences:
            sentence = sentences[0]
            return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rsplit(" ", 1)[0] + "…"
    return ""


def remove_cited(text: str, removed: set[str]) -> tuple[str, int]:
    """Take out every statement whose citation names only `removed` sources, and those ids
    from mixed citations. Returns (text, statements removed). A statement is the text from
    the previous sentence end, line start or ';' up to its citation."""
    if not removed:
        return text, 0
    out: list[str] = []
    pos = dropped = 0
    for match in CITATION.finditer(text):
        ids = citation_ids(match.group(1))
        keep = [i for i in ids if i not in removed]
        if len(keep) == len(ids):
            continue
        if keep:
            out.append(text[pos:match.start()] + f"[{', '.join(keep)}]")
        else:
            before = text[pos:match.start()]
            cut = _statement_start(before)
            out.append(before[:cut].rstrip(" ;,") if cut else "")
            dropped += 1
            pos = match.end()
            joiner = re.match(r"[ \t]*[;,][ \t]*", text[pos:])
            if joiner and re.search(r"(?:^|[.!?…\]\n])\s*$", "".join(out)):
                pos += joiner.end()  # "A [a]. B [gone]; C [a]." -> "A [a]. C [a]."
                out.append(" ")
            continue
        pos = match.end()
    out.append(text[pos:])
    return _tidy("".join(out)), dropped


def _statement_start(before: str) -> int:
    """Where the statement that ends at the end of `before` starts."""
    best = 0
    for pattern in (r"\n", r"[.!?…][\"'”’)]*\s+", r";\s*", r"\]\s*[.!?]?\s+"):
        for m in re.finditer(pattern, before):
            best = max(best, m.end())
    return best


def _tidy(text: str) -> str:
    """Drop lines and sections that a removal left empty, and doubled spaces."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and re.fullmatch(r"(?:[-*+]|\d+[.)])?\s*(?:\*\*[^*]*\*\*:?)?\s*[.;,:]*", stripped) and not stripped.startswith("**"):
            continue
        lines.append(re.sub(r"(?<=\S) {2,}", " ", line.rstrip()).replace(" .", ".").replace(" ;", ";"))
    # A heading followed only by blank lines until the next heading of its level or higher goes too.
    out: list[str] = []
    for i, line in enumerate(lines):
        heading = re.match(r"^(#{1,6})\s", line)
        if heading:
            level = len(heading.group(1))
            rest = lines[i + 1:]
            nxt = next((j for j, l in enumerate(rest) if re.match(rf"^#{{1,{level}}}\s", l)), len(rest))
            if not any(l.strip() for l in rest[:nxt]):
                continue
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def clean_body(body: str, allowed: set[str], removed: set[str]) -> tuple[str, list[dict]]:
    """The model's body made safe to store: no frontmatter, no wikilinks, citations only to
    allowed ids (a statement citing only other ids is taken out). Returns (body, notes)."""
    notes: list[dict] = []
    text = strip_links(strip_frontmatter((body or "").replace("\r\n", "\n")).strip())
    foreign = sorted({i for m in CITATION.finditer(text) for i in citation_ids(m.group(1)) if i not in allowed})
    if foreign:
        # A statement whose only support is an id the page may not cite has no source, so
        # (schema.md: "a claim without a source does not belong on the page") it goes too.
        text, dropped = remove_cited(text, set(foreign))
        for source_id in foreign:
            why = "a removed source" if source_id in removed else "not among the page's sources"
            notes.append({"what": f"citation [{source_id}] in the draft",
                          "why": f"{why}: taken out, with any statement citing only it"})
        if dropped:
            notes.append({"what": f"{dropped} statement(s) of the draft supported only by such citations",
                          "why": "a claim without a citable source does not belong on the page"})
    return (text.strip() + "\n") if text.strip() else "", notes


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


class _Sources:
    """Source rows and markdown, read once per run."""

    def __init__(self, ws: Workspace, conn: sqlite3.Connection):
        self.ws, self.conn = ws, conn
        self._rows: dict[str, dict | None] = {}
        self._texts: dict[str, str] = {}

    def row(self, source_id: str) -> dict | None:
        if source_id not in self._rows:
            from kompl.ingest import store

            self._rows[source_id] = store.get(self.conn, source_id)
        return self._rows[source_id]

    def title(self, source_id: str) -> str:
        row = self.row(source_id)
        return row["title"] if row else source_id

    def text(self, source_id: str) -> str:
        if source_id not in self._texts:
            from kompl.ingest import store

            self._texts[source_id] = strip_frontmatter(store.read_markdown(self.ws, source_id)).strip()
        return self._texts[source_id]


@dataclass
class _Job:
    """One plan on its way to a draft."""

    plan: dict
    allowed: list[str]
    new: list[str]
    removed: set[str]
    existing: str | None  # the current page body (links stripped), None for a new page
    variables: dict
    passages: list[dict]
    left_out: list[dict] = field(default_factory=list)
    error: str | None = None
    rounds: int = 0
    summarize_calls: int = 0
    summarize_ids: list[int] = field(default_factory=list)
    groups: list[list[dict]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.plan["page_key"]


def _existing_body(conn: sqlite3.Connection, plan: dict) -> str | None:
    from kompl.errors import NotFoundError
    from kompl.wiki import store as pages

    page = None
    if plan.get("page_id"):
        page = conn.execute("SELECT page_id FROM pages WHERE page_id = ?", (plan["page_id"],)).fetchone()
    if page is None:
        page = conn.execute("SELECT page_id FROM pages WHERE page_key = ? AND status = 'active'",
                            (plan["page_key"],)).fetchone()
    if page is None:
        return None
    try:
        text = pages.content(conn, page[0], plan.get("base_version"))
    except NotFoundError:
        text = pages.content(conn, page[0])
    return strip_links(strip_frontmatter(text)).strip() + "\n"


def _entity(conn: sqlite3.Connection, plan: dict) -> dict | None:
    from kompl.pipeline import resolve

    inputs = plan["inputs"]
    ref = inputs.get("entity_id") or plan["page_key"].split(":", 1)[-1]
    entity = resolve.canonical_for(conn, ref) if ref else None
    if entity is None and plan["page_type"] in ("entity", "concept"):
        entity = resolve.canonical_for(conn, plan["title"])
    if entity is None:
        return None
    ids = [r[0] for r in conn.execute("SELECT entity_id FROM entities WHERE entity_id = ? OR merged_into = ?",
                                      (entity["entity_id"], entity["entity_id"]))]
    rows = conn.execute(f"SELECT alias, norm FROM aliases WHERE status = 'merged' AND entity_id IN ({_marks(ids)})",
                        ids).fetchall()
    names = [entity["canonical_name"], *[r[0] for r in rows], *(inputs.get("aliases") or [])]
    entity["ids"] = ids
    entity["names"] = list(dict.fromkeys(n for n in names if n and n.strip()))
    entity["norms"] = sorted({norm_name(n) for n in entity["names"]} | {r[1] for r in rows})
    return entity


def _marks(items: list) -> str:
    return ",".join("?" * len(items)) or "NULL"


def _name_pattern(names: list[str]) -> re.Pattern | None:
    from kompl.wiki.markdown import link_pattern

    return link_pattern([n for n in names if len(n.strip()) >= 2])


def _mentioning_passages(text: str, pattern: re.Pattern | None, source_id: str) -> list[dict]:
    """Paragraphs of a source that mention the subject (long ones: just those sentences)."""
    if pattern is None:
        return []
    out = []
    for para in re.split(r"\n[ \t]*\n", text):
        para = para.strip()
        if not para or not pattern.search(para):
            continue
        if len(para) > PASSAGE_CHARS:
            para = " ".join(s for s in split_sentences(para) if pattern.search(s))
        out.append({"source": source_id, "text": para})
    return out


def _claims(conn: sqlite3.Connection, sources: list[str], norms: set[str] | None,
            pattern: re.Pattern | None) -> list[dict]:
    rows = conn.execute(
        f"SELECT id, source_id, claim, quote, entities FROM claims WHERE source_id IN ({_marks(sources)})"
        " ORDER BY source_id, COALESCE(quote_start, id), id", sources).fetchall()
    out = []
    for r in rows:
        involved = json.loads(r["entities"] or "[]")
        if norms is not None:
            hit = any(norm_name(e) in norms for e in involved) or bool(pattern and pattern.search(r["claim"] + " " + r["quote"]))
            if not hit:
                continue
        out.append({"id": r["id"], "source": r["source_id"], "claim": r["claim"],
                    "quote": re.sub(r"\s+", " ", r["quote"]).strip(), "entities": involved})
    return out


def _conflicts(conn: sqlite3.Connection, allowed: set[str], new: set[str], *, entity_ids: list[str],
               conflict_ids: list[int]) -> list[dict]:
    rows = conn.execute(
        "SELECT c.id, c.source_a, c.source_b, c.topic, c.reason, ca.claim AS claim_a, ca.quote AS quote_a,"
        " cb.claim AS claim_b, cb.quote AS quote_b FROM conflicts c"
        " JOIN claims ca ON ca.id = c.claim_a JOIN claims cb ON cb.id = c.claim_b"
        f" WHERE c.verdict = 'contradicts' AND (c.entity_id IN ({_marks(entity_ids)}) OR c.id IN ({_marks(conflict_ids)}))"
        " ORDER BY c.id", [*entity_ids, *conflict_ids]).fetchall()
    out = []
    for r in rows:
        if r["source_a"] not in allowed or r["source_b"] not in allowed:
            continue
        if not ({r["source_a"], r["source_b"]} & new):
            continue  # already on the page from an earlier draft
        out.append({
            "id": r["id"], "topic": r["topic"], "reason": r["reason"],
            "a": {"source": r["source_a"], "claim": r["claim_a"], "quote": re.sub(r"\s+", " ", r["quote_a"]).strip()},
            "b": {"source": r["source_b"], "claim": r["claim_b"], "quote": re.sub(r"\s+", " ", r["quote_b"]).strip()},
        })
    return out


def _source_dossier(conn: sqlite3.Connection, srcs: _Sources, sources: list[str]) -> tuple[dict, list[dict]]:
    """A source page: the source's metadata, extraction summary, claims, entities and concepts."""
    from kompl.pipeline.extract import get_extraction

    dossier: dict[str, Any] = {"sources": {}, "summary": {}, "claims": [], "entities": [], "concepts": []}
    passages = []
    for sid in sources:
        row = srcs.row(sid)
        dossier["sources"][sid] = {"title": srcs.title(sid), "type": (row or {}).get("source_type", ""),
                                   "url": (row or {}).get("url") or ""}
        extraction = get_extraction(conn, sid)
        if extraction:
            dossier["summary"][sid] = extraction["result"].get("summary", "")
        dossier["claims"] += _claims(conn, [sid], None, None)
        for r in conn.execute("SELECT name, type, kind, count, description FROM entity_mentions WHERE source_id = ?"
                              " ORDER BY count DESC, name", (sid,)):
            if r["kind"] == "entity":
                dossier["entities"].append({"source": sid, "name": r["name"], "type": r["type"], "count": r["count"]})
            else:
                dossier["concepts"].append({"source": sid, "name": r["name"], "description": r["description"]})
        passages.append({"source": sid, "text": srcs.text(sid)})
    return dossier, passages


def _subject_dossier(conn: sqlite3.Connection, srcs: _Sources, plan: dict, new: list[str],
                     allowed: list[str]) -> tuple[dict, list[dict]]:
    """Entity, concept and comparison pages: everything the new sources say about the subject."""
    entity = _entity(conn, plan)
    inputs = plan["inputs"]
    names = entity["names"] if entity else [re.sub(r":\s*conflicting accounts$", "", plan["title"], flags=re.I)]
    norms = set(entity["norms"]) if entity else {norm_name(n) for n in names}
    pattern = _name_pattern(names)
    kind = entity["kind"] if entity else ("concept" if plan["page_type"] == "concept" else "entity")
    dossier: dict[str, Any] = {
        "subject": {"name": entity["canonical_name"] if entity else names[0], "aliases": names[1:],
                    "type": entity["type"] if entity else "", "kind": kind},
        "sources": {sid: {"title": srcs.title(sid)} for sid in new},
        "contexts": [], "descriptions": [], "claims": [], "relationships": [], "conflicts": [],
    }
    marks = _marks(new)
    rows = conn.execute(
        f"SELECT source_id, name, context, description FROM entity_mentions WHERE source_id IN ({marks})"
        f" AND norm IN ({_marks(sorted(norms))}) ORDER BY source_id, count DESC", [*new, *sorted(norms)]).fetchall()
    for r in rows:
        if r["context"] and r["context"].strip():
            dossier["contexts"].append({"source": r["source_id"], "name": r["name"], "sentence": r["context"].strip()})
        if r["description"] and r["description"].strip():
            dossier["descriptions"].append({"source": r["source_id"], "name": r["name"],
                                            "description": r["description"].strip()})
    dossier["claims"] = _claims(conn, new, norms, pattern)
    for r in conn.execute(f"SELECT source_id, from_name, to_name, type, description FROM relationship_mentions"
                          f" WHERE source_id IN ({marks}) ORDER BY id", new):
        if norm_name(r["from_name"]) in norms or norm_name(r["to_name"]) in norms:
            dossier["relationships"].append({"source": r["source_id"], "from": r["from_name"], "to": r["to_name"],
                                             "type": r["type"], "description": r["description"]})
    conflict_ids = [int(c) for c in inputs.get("conflict_ids") or []]
    dossier["conflicts"] = _conflicts(conn, set(allowed), set(new), entity_ids=entity["ids"] if entity else [],
                                      conflict_ids=conflict_ids)
    for c in dossier["conflicts"]:
        for side in ("a", "b"):
            sid = c[side]["source"]
            dossier["sources"].setdefault(sid, {"title": srcs.title(sid)})
    passages = [p for sid in new for p in _mentioning_passages(srcs.text(sid), pattern, sid)]
    return dossier, passages


def _overview_dossier(conn: sqlite3.Connection, plan: dict, allowed: list[str], existing: str | None) -> dict:
    """Overview pages: the member pages' titles and summaries (only members not on the page yet, for updates)."""
    from kompl.wiki import store as pages

    members = []
    for key in plan["inputs"].get("members") or []:
        page = pages.get_by_key(conn, key)
        if page is not None:
            member = {"key": key, "title": page["title"], "page_type": page["page_type"], "summary": page["summary"],
                      "sources": [s for s in pages.page_source_ids(conn, page["page_id"]) if s in allowed]}
        else:
            row = conn.execute("SELECT title, page_type, summary, inputs FROM page_plans WHERE page_key = ?"
                               " AND status NOT IN ('rejected', 'superseded') ORDER BY plan_id DESC LIMIT 1",
                               (key,)).fetchone()
            if row is None:
                continue
            srcs = json.loads(row["inputs"] or "{}").get("sources") or []
            member = {"key": key, "title": row["title"], "page_type": row["page_type"], "summary": row["summary"] or "",
                      "sources": [s for s in srcs if s in allowed]}
        if existing and member["title"].casefold() in existing.casefold():
            continue
        members.append(member)
    return {"category": plan["category"], "members": members}


def build_job(ws: Workspace, conn: sqlite3.Connection, plan: dict, schema_text: str, srcs: _Sources) -> _Job:
    """Everything one plan's prompt needs (read-only; no transaction)."""
    inputs = plan["inputs"]
    removed = set(inputs.get("removed_sources") or [])
    allowed = sorted(s for s in dict.fromkeys(inputs.get("sources") or []) if s not in removed)
    default_new = allowed if plan["action"] == "create" else []
    new = [s for s in dict.fromkeys(inputs.get("new_sources", default_new) or []) if s in allowed]
    existing = _existing_body(conn, plan) if plan["action"] == "update" or plan.get("page_id") else None
    prompt_existing = existing
    left_out: list[dict] = []
    if existing is not None and removed:
        prompt_existing, dropped = remove_cited(existing, removed)
        if dropped:
            left_out.append({"what": f"{dropped} statement(s) of the existing page citing only removed sources",
                             "why": "removed_sources must not appear on the page"})
    page_type = plan["page_type"]
    if page_type in ("source", "original-source"):
        dossier, passages = _source_dossier(conn, srcs, new)
    elif page_type == "overview":
        dossier, passages = _overview_dossier(conn, plan, allowed, existing), []
    else:
        dossier, passages = _subject_dossier(conn, srcs, plan, new, allowed)
    variables = {
        "page": {"title": plan["title"], "page_type": page_type, "category": plan["category"],
                 "action": plan["action"], "page_key": plan["page_key"]},
        "allowed_sources": allowed,
        "new_sources": new,
        "action": "update: keep it and add what the new sources say" if existing is not None else "create",
        "schema": schema_text,
        "existing_page": prompt_existing if prompt_existing is not None else NEW_PAGE,
        "dossier": dossier,
        "passages": passages,
    }
    return _Job(plan=plan, allowed=allowed, new=new, removed=removed, existing=existing, variables=variables,
                passages=passages, left_out=left_out)


def read_schema(ws: Workspace) -> str:
    """The workspace's schema.md (the shipped default when the workspace has none)."""
    from kompl.workspace import default_schema_path

    for path in (ws.schema_path, default_schema_path()):
        if path and path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


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
